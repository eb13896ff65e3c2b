//! The `state-read` function: reads a state (GET .../state). Wiring only.

hegemony_state_functions::function!("state-read");
