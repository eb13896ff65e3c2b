// The API's shapes, as shared/src/http/openapi.json describes them.

export type Actor =
  | { kind: 'user'; user: string }
  | { kind: 'step'; run: string; step: string; attempt: number; run_url?: string | null }
  | { kind: 'platform' | 'sweeper' | 'cli' };

export interface OrgActions {
  download: boolean;
  import: boolean;
  rollback: boolean;
  force_unlock: boolean;
  delete: boolean;
  audit: boolean;
  permissions: boolean;
}

export interface Identity {
  org: string;
  actor: Actor;
  role: Role;
  allowed_actions: OrgActions;
}

export type Role = 'viewer' | 'operator' | 'admin';

export interface LockView {
  id: string;
  operation: string | null;
  who: string | null;
  version: string | null;
  created: string | null;
  info: string | null;
  holder: Actor;
  since: string;
  live_until: string | null;
}

export interface HoldView {
  id: string;
  run: string;
  run_url: string | null;
  since: string;
}

export interface StateItem {
  name: string;
  lineage: string | null;
  latest_version: number | null;
  serial: number | null;
  size: number | null;
  updated_at: string | null;
  updated_by: Actor | null;
  opentofu_encrypted: boolean;
  lock: LockView | null;
  hold: HoldView | null;
}

export interface StateList {
  org: string;
  states: StateItem[];
  next_cursor: string | null;
}

export interface AllowedActions {
  download: boolean;
  import: boolean;
  rollback: boolean;
  force_unlock: boolean;
  delete: boolean;
}

export interface StateView extends StateItem {
  allowed_actions: AllowedActions;
}

export interface ChangeRecord {
  saves: number;
  first_save_at: string;
  last_save_at: string;
  ended: string;
  rolled_back_from?: number | null;
}

export interface Version {
  version: number;
  serial: number | null;
  lineage: string | null;
  size: number;
  sha256: string;
  source: 'write' | 'import' | 'rollback';
  key: string;
  opentofu_encrypted: boolean;
  /** The Terraform (or OpenTofu) version that wrote it; null when unknown. */
  terraform_version: string | null;
  /** Its number of resource instances; null when unknown. */
  instances: number | null;
  created_at: string;
  writer: Actor;
  change: ChangeRecord;
}

export interface AuditEntry {
  org: string;
  at: string;
  action: string;
  actor: Actor;
  state?: string | null;
  version?: number | null;
  detail?: unknown;
}

export interface AuditPage {
  entries: AuditEntry[];
  next_cursor: string | null;
}

export type Permission = 'tf_state:read' | 'tf_state:write' | 'tf_state:manage';
export type Allocation = Record<Permission, Role | null>;

/** One side of a comparison. */
export interface ComparedSide {
  version: number;
  serial: number | null;
  lineage: string | null;
  terraform_version: string | null;
}

export interface ChangeCounts {
  added: number;
  changed: number;
  removed: number;
}

export interface InstanceRef {
  address: string;
  module: string | null;
  mode: string;
  type: string;
  name: string;
  index_key: number | string | null;
  deposed: string | null;
}

export interface ChangedInstance extends InstanceRef {
  attributes: string[];
  sensitive: string[];
  sensitive_only: boolean;
  other: string[];
}

export interface OutputRef {
  name: string;
  sensitive: boolean;
}

export interface ChangedOutput extends OutputRef {
  was_sensitive: boolean;
  value_changed: boolean;
}

/** `GET /api/tf-states/{name}/versions/{version}/changes`: names and paths, never a value. */
export interface Changes {
  state: string;
  version: ComparedSide;
  since: ComparedSide | null;
  same_lineage: boolean;
  counts: ChangeCounts;
  resources: { added: InstanceRef[]; changed: ChangedInstance[]; removed: InstanceRef[] };
  outputs: { added: OutputRef[]; changed: ChangedOutput[]; removed: OutputRef[] };
}

/** An app state's lock, as everyone but its holder sees it (docs/octo.md). */
export interface AppLock {
  commit_id: string;
  holder: Actor;
  who: string;
  info: string;
  since: string;
}

/** One file of an archive: never its content. */
export interface AppFile {
  name: string;
  kind: 'tfstate' | 'journal' | 'json';
  command?: string | null;
  size: number;
  sha256: string;
  uploaded_in: string;
  uploaded_at: string;
  lineage?: string | null;
  serial?: number | null;
}

export type ArchiveEnded = 'sealed' | 'given_up' | 'force_unlocked';

/** A sealed change of an app. */
export interface AppArchive {
  commit_id: string;
  ended: ArchiveEnded;
  holder: Actor;
  who: string;
  info: string;
  locked_at: string;
  sealed_at: string;
  sealed_by: Actor;
  size: number;
  files: AppFile[];
}

export interface AppItem {
  name: string;
  lock: AppLock | null;
  newest: { commit_id: string; ended: ArchiveEnded; sealed_at: string; size: number; files: number } | null;
  archives: number;
}

export interface AppList {
  org: string;
  apps: AppItem[];
  next_cursor: string | null;
}

export interface AppView {
  name: string;
  lock: AppLock | null;
  newest: AppArchive | null;
  archives: number;
  allowed_actions: { download: boolean; force_unlock: boolean; delete_archive: boolean };
}

export interface ArchiveList {
  app: string;
  archives: AppArchive[];
  next_cursor: string | null;
}
