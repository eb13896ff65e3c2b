//! The `state-write` function: saves a state (POST .../state). Wiring only.

hegemony_state_functions::function!("state-write");
