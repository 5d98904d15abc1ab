//! The model checker (stateright) over the recipes against `zk_recipes_sim::testkit::zk`.
//!
//! One test binary per layer (issue 28); each former test file is a module here.

mod model_check;
