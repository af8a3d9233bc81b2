//! `program!`: an autobatch program written inside Rust code, checked when
//! the Rust code compiles, called through typed methods.
//!
//! ```ignore
//! let prog = autobatch::program! {
//!     fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }
//! };
//! let out = prog.fib(vec![3, 7, 4]).run(&autobatch::RunConfig::default())?;
//! ```
//!
//! The macro lays the tokens out as the source text they were written as
//! (same lines and columns), compiles it with the front end and the
//! lowering, and either reports every diagnostic as a `compile_error!` at
//! the tokens it points to, or expands to a value with one method per
//! function that can be an entry: `prog.f(a, b)` takes each argument as one
//! value per member (any iterator) or one for all
//! (`autobatch::Shared(v)`), and returns an `autobatch::typed::Typed` whose
//! `run` gives each member's result as the Rust type of the function's
//! result type.
//!
//! This crate must not know how programs run: it compiles a program only to
//! check it and to read its entries' signatures, and generates calls of the
//! `autobatch` crate's typed API (which re-exports the macro).

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use quote::{format_ident, quote};

use autobatch_ir::Program;
use autobatch_types::{ScalarType, Type};

mod layout;

use layout::Layout;

/// See the crate documentation.
#[proc_macro]
pub fn program(input: TokenStream) -> TokenStream {
    let layout = Layout::of(input);
    // The front end parses text with `syn` over `proc_macro2`; inside a
    // macro that would mix the compiler's tokens with its own, so it uses
    // `proc_macro2`'s own implementation, and this macro builds its output
    // with `proc_macro` directly (compile errors, to keep their spans) or
    // as text (the expansion).
    proc_macro2::fallback::force();
    match autobatch_lower::compile(&layout.text) {
        // `{ compile_error!{..}; compile_error!{..}; }`: one error per
        // diagnostic, where the macro stands for an expression.
        Err(diagnostics) => {
            let errors: TokenStream = diagnostics
                .iter()
                .flat_map(|d| {
                    let semicolon: TokenTree = Punct::new(';', Spacing::Alone).into();
                    compile_error(&layout, d).into_iter().chain([semicolon])
                })
                .collect();
            TokenTree::from(Group::new(Delimiter::Brace, errors)).into()
        }
        Ok(program) => expand(&layout, &program),
    }
}

/// A diagnostic of the program as a Rust compile error at the tokens it
/// points to: its message, its label and its notes.
fn compile_error(layout: &Layout, diagnostic: &autobatch_frontend::Diagnostic) -> TokenStream {
    let span = layout.span_at(diagnostic.loc);
    let mut message = diagnostic.message.clone();
    if !diagnostic.label.is_empty() {
        message.push_str(&format!("\n  {}", diagnostic.label));
    }
    for note in &diagnostic.notes {
        message.push_str(&format!("\n  note: {note}"));
    }
    let mut literal = Literal::string(&message);
    literal.set_span(span);
    let tokens: Vec<TokenTree> = vec![
        Punct::new(':', Spacing::Joint).into(),
        Punct::new(':', Spacing::Alone).into(),
        Ident::new("core", span).into(),
        Punct::new(':', Spacing::Joint).into(),
        Punct::new(':', Spacing::Alone).into(),
        Ident::new("compile_error", span).into(),
        Punct::new('!', Spacing::Alone).into(),
        Group::new(Delimiter::Brace, TokenTree::from(literal).into()).into(),
    ];
    tokens
        .into_iter()
        .map(|mut tree| {
            tree.set_span(span);
            tree
        })
        .collect()
}

/// A function that can be run as an entry, with its signature.
struct Entry<'p> {
    name: &'p str,
    params: Vec<(&'p str, &'p Type)>,
    ret: &'p Type,
}

/// The functions the user wrote without const generic parameters (not the
/// instances of generic ones, nor derived gradients), in program order.
fn entries(program: &Program) -> Vec<Entry<'_>> {
    program
        .functions
        .values()
        .filter(|f| !f.name.contains('<') && !f.name.contains('\''))
        .map(|f| Entry {
            name: &f.name,
            params: f
                .signature
                .iter()
                .map(|p| (p.name.as_str(), &p.ty))
                .collect(),
            ret: &f.ret_type,
        })
        .collect()
}

/// The value the macro expands to: a struct with a method per entry.
fn expand(layout: &Layout, program: &Program) -> TokenStream {
    let source = &layout.text;
    let path = Span::call_site().file();
    let methods = entries(program).into_iter().map(|e| method(program, e));
    quote! {{
        /// The program of a `program!`: a method per function.
        struct AutobatchProgram {
            compiled: ::autobatch::Compiled,
        }
        impl AutobatchProgram {
            #(#methods)*

            /// The compiled program (its IR, its source).
            #[allow(dead_code)]
            pub fn as_compiled(&self) -> &::autobatch::Compiled {
                &self.compiled
            }

            /// Registers the host function of a host primitive the program
            /// calls (`autobatch::Compiled::with_host`).
            #[allow(dead_code)]
            pub fn with_host(
                self,
                name: &str,
                function: impl Fn(&[::autobatch::Value]) -> ::std::result::Result<::autobatch::Value, ::std::string::String>
                    + ::std::marker::Send
                    + ::std::marker::Sync
                    + 'static,
            ) -> ::std::result::Result<Self, ::autobatch::InputError> {
                ::std::result::Result::Ok(AutobatchProgram {
                    compiled: self.compiled.with_host(name, function)?,
                })
            }
        }
        AutobatchProgram {
            compiled: ::autobatch::compile(#source, #path)
                .expect("program! checked this program when the Rust code compiled"),
        }
    }}
    .to_string()
    .parse()
    .expect("the expansion is Rust tokens")
}

/// The method that calls `entry`.
fn method(program: &Program, entry: Entry<'_>) -> proc_macro2::TokenStream {
    let name = entry.name;
    let method = format_ident!("{}", name);
    let params = entry.params.iter().map(|(param, ty)| {
        let param = format_ident!("{}", param);
        let ty = rust_type(ty);
        quote!(#param: impl ::autobatch::typed::Arg<#ty>)
    });
    let gives = entry.params.iter().map(|(param, _)| {
        let ident = format_ident!("{}", param);
        quote!(let autobatch_call = ::autobatch::typed::Arg::give(#ident, autobatch_call, #param);)
    });
    let ret = rust_type(entry.ret);
    let signature: Vec<String> = entry
        .params
        .iter()
        .map(|(p, ty)| format!("{p}: {}", type_text(program, ty)))
        .collect();
    let doc = format!(
        "`{name}({})` for a batch: give each argument one value per member (an iterator) or `autobatch::Shared(value)` for all, the statics with `.shared(name, value)`, then `.run(&config)`.",
        signature.join(", ")
    );
    quote! {
        #[doc = #doc]
        #[allow(dead_code, clippy::too_many_arguments)]
        pub fn #method(&self, #(#params),*) -> ::autobatch::typed::Typed<'_, #ret> {
            let autobatch_call = self.compiled.call(#name);
            #(#gives)*
            ::autobatch::typed::Typed::new(autobatch_call)
        }
    }
}

/// The Rust type of a value of the language's type `ty` in the typed API:
/// scalars as themselves (`usize` as `u64`), one-dimensional arrays as
/// `Vec`, arrays of more dimensions as `autobatch::typed::Array`, tuples of
/// up to four as tuples (more as `autobatch::Value`).
fn rust_type(ty: &Type) -> proc_macro2::TokenStream {
    match ty {
        Type::Tensor(t) => {
            let elem = format_ident!("{}", scalar_name(t.elem));
            match t.dims.len() {
                0 => quote!(#elem),
                1 => quote!(::std::vec::Vec<#elem>),
                _ => quote!(::autobatch::typed::Array<#elem>),
            }
        }
        Type::Tuple(items) if items.len() > 4 => quote!(::autobatch::Value),
        Type::Tuple(items) => {
            let items = items.iter().map(rust_type);
            quote!((#(#items,)*))
        }
    }
}

fn scalar_name(elem: ScalarType) -> &'static str {
    match elem {
        ScalarType::Bool => "bool",
        ScalarType::I32 => "i32",
        ScalarType::I64 => "i64",
        ScalarType::Usize => "u64",
        ScalarType::F32 => "f32",
        ScalarType::F64 => "f64",
    }
}

/// The language's type as written, for the methods' docs.
fn type_text(program: &Program, ty: &Type) -> String {
    match ty {
        Type::Tensor(t) => program.type_name(t),
        Type::Tuple(items) => {
            let items: Vec<String> = items.iter().map(|t| type_text(program, t)).collect();
            format!("({})", items.join(", "))
        }
    }
}
