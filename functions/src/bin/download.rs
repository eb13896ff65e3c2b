//! The `download` function: downloads a version's content. Wiring only.

hegemony_state_functions::function!("download");
