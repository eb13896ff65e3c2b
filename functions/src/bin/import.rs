//! The `import` function: imports a state file as a new state. Wiring only.

hegemony_state_functions::function!("import");
