//! The viewer for a browser page: `memviz_viewer::web::WebHandle`, exported by wasm-bindgen.

#[cfg(target_arch = "wasm32")]
pub use memviz_viewer::web::WebHandle;
