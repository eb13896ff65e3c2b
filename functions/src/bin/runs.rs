//! The `runs` function: the platform's runs API: step tokens, a run's end, a step's gone report. Wiring only.

hegemony_state_functions::function!("runs");
