//! The attributes behind zk-recipes' two call forms. The recipes' user surface is
//! written once, as async code, in `zk-recipes-surface`; that source is compiled twice,
//! once per form. In the async form `#[form]` is [`asynchronous`] (the code as written);
//! in the blocking form it is [`blocking`], which removes `async` from functions and
//! blocks and `.await` from expressions (in macro arguments too, such as `assert!`'s), so
//! every wait becomes a blocking call of the same name (the form's runtime module gives each waiting primitive both shapes).
//! `#[only_async]` / `#[only_blocking]` keep an item in one form only.
//!
//! Use an adapter crate (`zk-recipes-tokio`, `zk-recipes-blocking`), not this one.

use proc_macro::TokenStream;
use proc_macro2::{Group, TokenStream as Tokens, TokenTree};
use quote::ToTokens;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ImplItemFn, Item, ItemFn, Macro, Signature, TraitItemFn};

/// The async form: the item as written.
#[proc_macro_attribute]
pub fn asynchronous(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// The blocking form: the item without `async` and `.await`.
#[proc_macro_attribute]
pub fn blocking(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut item = syn::parse_macro_input!(item as Item);
    Strip.visit_item_mut(&mut item);
    item.into_token_stream().into()
}

/// Keeps the item (used as `only_async` in the async form, `only_blocking` in the
/// blocking one).
#[proc_macro_attribute]
pub fn keep(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Drops the item (used as `only_blocking` in the async form, `only_async` in the
/// blocking one).
#[proc_macro_attribute]
pub fn drop(_attr: TokenStream, _item: TokenStream) -> TokenStream {
    TokenStream::new()
}

struct Strip;

fn sync(sig: &mut Signature) {
    sig.asyncness = None;
}

/// A macro's arguments without `.await` (they are tokens, not parsed expressions).
fn strip_awaits(tokens: Tokens) -> Tokens {
    let mut out = Vec::new();
    let mut tokens = tokens.into_iter().peekable();
    while let Some(t) = tokens.next() {
        match t {
            TokenTree::Punct(ref p) if p.as_char() == '.' => {
                if matches!(tokens.peek(), Some(TokenTree::Ident(i)) if i == "await") {
                    tokens.next();
                } else {
                    out.push(t);
                }
            }
            TokenTree::Group(g) => {
                let mut stripped = Group::new(g.delimiter(), strip_awaits(g.stream()));
                stripped.set_span(g.span());
                out.push(TokenTree::Group(stripped));
            }
            t => out.push(t),
        }
    }
    out.into_iter().collect()
}

impl VisitMut for Strip {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        visit_mut::visit_expr_mut(self, e);
        match e {
            Expr::Await(a) => *e = (*a.base).clone(),
            Expr::Async(a) => {
                *e = Expr::Block(syn::ExprBlock {
                    attrs: a.attrs.clone(),
                    label: None,
                    block: a.block.clone(),
                })
            }
            _ => {}
        }
    }

    fn visit_macro_mut(&mut self, m: &mut Macro) {
        m.tokens = strip_awaits(std::mem::take(&mut m.tokens));
    }

    fn visit_item_fn_mut(&mut self, f: &mut ItemFn) {
        sync(&mut f.sig);
        visit_mut::visit_item_fn_mut(self, f);
    }

    fn visit_impl_item_fn_mut(&mut self, f: &mut ImplItemFn) {
        sync(&mut f.sig);
        visit_mut::visit_impl_item_fn_mut(self, f);
    }

    fn visit_trait_item_fn_mut(&mut self, f: &mut TraitItemFn) {
        sync(&mut f.sig);
        visit_mut::visit_trait_item_fn_mut(self, f);
    }
}
