// The API's shapes, under the names the pages use: each is the type generated (api.gen.ts,
// `npm run types`) from the served OpenAPI document (docs/api/openapi.json), whose schemas
// the server derives from its own Rust types. Nothing here is written twice.

import type * as api from './api.gen';

export type Actor = api.Actor;
export type LinkedActor = api.LinkedActor;
export type OrgActions = api.OrgActions;
export type Identity = api.Identity;
export type Role = api.Role;
export type LockView = api.Lock;
export type HoldView = api.Hold;
export type StateItem = api.StateItem;
export type StateList = api.StateList;
export type AllowedActions = api.AllowedActions;
export type StateView = api.StateView;
export type ChangeRecord = api.ChangeRecord;
export type Version = api.Version;
export type VersionList = api.VersionList;
export type AuditEntry = api.AuditEntry;
export type AuditPage = api.AuditPage;
export type Allocation = api.Allocation;
export type Permission = keyof Allocation;

/** `GET /api/deleted-states`: what a delete keeps for its retention, for admins. */
export type DeletedStateList = api.DeletedStateList;
export type DeletedState = api.DeletedStateView;
export type RestoreRequest = api.RestoreRequest;
export type Restored = api.Restored;

/** `GET /api/tf-states/{name}/versions/{version}/changes`: names and paths, never a value. */
export type Comparison = api.VersionComparison;
export type ComparedSide = api.ComparedVersion;
export type ChangeCounts = api.Counts;
export type InstanceRef = api.InstanceView;
export type ChangedInstance = api.ChangedInstance;
export type OutputRef = api.OutputView;
export type ChangedOutput = api.ChangedOutput;

/** `GET /api/tf-states/{name}/outputs`: a sensitive output by its type alone. */
export type StateOutputs = api.StateOutputs;
export type OutputValue = api.StateOutput;

export type AppLock = api.AppLock;
export type AppFile = api.AppFile;
export type ArchiveEnded = api.ArchiveEnded;
export type AppArchive = api.Archive;
export type AppItem = api.AppItem;
export type AppList = api.AppList;
export type AppView = api.AppView;
export type ArchiveList = api.ArchiveList;

/** `/api/org/trust-policies`: the org's trust policies for CI jobs. */
export type TrustPolicy = api.TrustPolicy;
export type TrustPolicies = api.TrustPolicies;

/** `/api/org/protected-states`: states only CI sessions of named trust policies change. */
export type Protection = api.Protection;
export type Protections = api.Protections;

/** `/api/resources`, `/api/resources/conflicts`, `/api/overview`: the inventory across an
 * org's states (addresses, types, providers; never a value nor an identity). */
export type Resource = api.Resource;
export type ResourceList = api.ResourceList;
export type Conflict = api.Conflict;
export type ConflictList = api.ConflictList;
export type Overview = api.Overview;
