//! The `apps` function: app states (Octo's remote state): locks, uploads, seals, archives
//! and their files. Wiring only.

hegemony_state_functions::function!("apps");
