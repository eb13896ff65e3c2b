//! The `list` function: lists states, shows one, and serves the API description. Wiring only.

hegemony_state_functions::function!("list");
