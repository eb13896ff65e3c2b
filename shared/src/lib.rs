pub mod crypto;
pub mod domain;
pub mod ports;
