//! Roles (viewer < operator < admin) and the org's allocation of the four state permissions
//! to roles. The admin role itself gates the allocation and the audit, so nobody locks
//! themselves out.

use serde::{Deserialize, Serialize};

use super::Refusal;

/// A role within one org, ordered from least to most.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(format!(
                "unknown role {other:?}: use viewer, operator or admin"
            )),
        }
    }
}

/// The permissions an org allocates to roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Read state content (backend GET, download).
    Read,
    /// Lock, write, import, roll back.
    Write,
    /// Force unlock, delete.
    Manage,
    /// Read a state's outputs, never a sensitive value: what a consumer's
    /// `terraform_remote_state` reads.
    Outputs,
}

impl Permission {
    /// Every permission, in the order the allocation lists them.
    pub const ALL: [Permission; 4] = [
        Permission::Read,
        Permission::Write,
        Permission::Manage,
        Permission::Outputs,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "tf_state:read",
            Permission::Write => "tf_state:write",
            Permission::Manage => "tf_state:manage",
            Permission::Outputs => "tf_state:outputs",
        }
    }

    /// The permission of that name (`tf_state:read`, ...), `None` for any other text.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// Which role (or none: disabled) each permission needs in one org.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Allocation {
    #[serde(rename = "tf_state:read")]
    pub read: Option<Role>,
    #[serde(rename = "tf_state:write")]
    pub write: Option<Role>,
    #[serde(rename = "tf_state:manage")]
    pub manage: Option<Role>,
    /// An allocation stored before this permission existed reads as viewer, its default.
    #[serde(rename = "tf_state:outputs", default = "viewer")]
    pub outputs: Option<Role>,
}

/// The default role of `tf_state:outputs`.
fn viewer() -> Option<Role> {
    Some(Role::Viewer)
}

impl Default for Allocation {
    /// Read and write for operators, manage for admins, outputs for viewers.
    fn default() -> Self {
        Self {
            read: Some(Role::Operator),
            write: Some(Role::Operator),
            manage: Some(Role::Admin),
            outputs: viewer(),
        }
    }
}

impl Allocation {
    /// The role `permission` needs; `None` when it is disabled.
    pub fn required(&self, permission: Permission) -> Option<Role> {
        match permission {
            Permission::Read => self.read,
            Permission::Write => self.write,
            Permission::Manage => self.manage,
            Permission::Outputs => self.outputs,
        }
    }

    /// This allocation with `permission` needing `role` (`None`: disabled).
    pub fn with(mut self, permission: Permission, role: Option<Role>) -> Self {
        let slot = match permission {
            Permission::Read => &mut self.read,
            Permission::Write => &mut self.write,
            Permission::Manage => &mut self.manage,
            Permission::Outputs => &mut self.outputs,
        };
        *slot = role;
        self
    }

    /// Whether `role` holds `permission` under this allocation.
    pub fn allows(&self, role: Role, permission: Permission) -> bool {
        self.required(permission)
            .is_some_and(|needed| role >= needed)
    }

    /// # Errors
    /// `Refusal::Forbidden` naming the permission and the role it needs (or that it is off).
    pub fn require(&self, role: Role, permission: Permission) -> Result<(), Refusal> {
        if self.allows(role, permission) {
            return Ok(());
        }
        let reason = match self.required(permission) {
            Some(needed) => format!(
                "{} needs the {} role; this token has {}",
                permission.as_str(),
                needed.as_str(),
                role.as_str()
            ),
            None => format!("{} is disabled in this organization", permission.as_str()),
        };
        Err(Refusal::Forbidden { reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_allocation_gives_read_write_to_operators_and_manage_to_admins() {
        let a = Allocation::default();
        assert!(a.allows(Role::Viewer, Permission::Outputs));
        assert!(!a.allows(Role::Viewer, Permission::Read));
        assert!(a.allows(Role::Operator, Permission::Read));
        assert!(a.allows(Role::Operator, Permission::Write));
        assert!(!a.allows(Role::Operator, Permission::Manage));
        assert!(a.allows(Role::Admin, Permission::Manage));
    }

    #[test]
    fn a_disabled_permission_refuses_even_admins() {
        let a = Allocation {
            read: None,
            ..Allocation::default()
        };
        let err = a.require(Role::Admin, Permission::Read).unwrap_err();
        assert!(matches!(err, Refusal::Forbidden { ref reason } if reason.contains("disabled")));
    }

    #[test]
    fn allocation_serializes_with_permission_names() {
        let json = serde_json::to_value(Allocation::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"tf_state:read": "operator", "tf_state:write": "operator", "tf_state:manage": "admin", "tf_state:outputs": "viewer"})
        );
    }

    /// Allocations stored before `tf_state:outputs` existed have no such field.
    #[test]
    fn a_stored_allocation_without_outputs_reads_as_viewer() {
        let stored =
            r#"{"tf_state:read": "viewer", "tf_state:write": "admin", "tf_state:manage": null}"#;
        let a: Allocation = serde_json::from_str(stored).unwrap();
        assert_eq!(a.outputs, Some(Role::Viewer));
        assert_eq!(a.read, Some(Role::Viewer));
        assert_eq!(a.manage, None);
        let disabled: Allocation = serde_json::from_str(
            r#"{"tf_state:read": null, "tf_state:write": null, "tf_state:manage": null, "tf_state:outputs": null}"#,
        )
        .unwrap();
        assert_eq!(disabled.outputs, None, "a disabled outputs stays disabled");
    }

    #[test]
    fn permissions_are_named_as_the_allocation_names_them() {
        for p in Permission::ALL {
            assert_eq!(Permission::named(p.as_str()), Some(p));
            let a = Allocation::default().with(p, Some(Role::Admin));
            assert_eq!(a.required(p), Some(Role::Admin));
            let json = serde_json::to_value(a).unwrap();
            assert_eq!(json[p.as_str()], "admin");
        }
        assert_eq!(Permission::named("tf_state:everything"), None);
    }
}
