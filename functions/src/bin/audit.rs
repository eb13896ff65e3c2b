//! The `audit` function: reads the audit of a state and of the org. Wiring only.

hegemony_state_functions::function!("audit");
