//! The `lock` function: takes and releases locks (POST and DELETE .../lock). Wiring only.

hegemony_state_functions::function!("lock");
