//! The `versions` function: lists a state's versions. Wiring only.

hegemony_state_functions::function!("versions");
