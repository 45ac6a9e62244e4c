//! Why a library refuses an option: the field, as the library's options
//! name it, and the reason. Callers say the field in their own words (the
//! command line's `--dut-cpu`, a scenario's `lab.dut_cpu`).

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub reason: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for FieldError {}
