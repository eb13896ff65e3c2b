//! The `rollback` function: rolls a state back to an earlier version. Wiring only.

hegemony_state_functions::function!("rollback");
