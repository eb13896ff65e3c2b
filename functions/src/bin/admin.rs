//! The `admin` function: force-unlocks and deletes states, and reads and sets the org's permissions. Wiring only.

hegemony_state_functions::function!("admin");
