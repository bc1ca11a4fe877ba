//! Creates and updates that pass the mutating admission webhooks on their way
//! to the store, in the real API server's order: built-in defaulting and
//! mutating plugins, then the webhooks (without holding the store), then
//! validation and the write itself.

use super::crud;
use super::mutating_admission::{self, Write};
use super::objects;
use super::patch::{self, PatchType};
use super::resources::Resource;
use super::state::Shared;
use super::status::ApiError;
use super::view;
use super::webhook_matching::Target;
use serde_json::Value;

/// The object a POST stores, after the webhooks that cover the create.
pub async fn admitted_create(
    state: &Shared,
    res: &'static Resource,
    ns: &str,
    obj: Value,
) -> Result<Value, ApiError> {
    let name = objects::meta_str(&obj, "name").to_string();
    let write = Write {
        target: Target {
            res,
            operation: "CREATE",
            subresource: "",
        },
        namespace: ns,
        name: &name,
        patch: false,
    };
    if !mutating_admission::any_rule_matches(state, &write.target) {
        return Ok(obj);
    }
    let seen = crud::before_webhooks(&state.store.lock(), res, ns, obj)?;
    mutating_admission::admit(state, &write, seen, None).await
}

/// How an update changes the stored object.
pub enum Edit<'a> {
    /// PUT: the new object.
    Replace(Value),
    /// PATCH: the body, applied to the object as stored.
    Patch(&'a [u8], PatchType),
}

/// Times a PATCH is tried again when the object changed while its webhooks
/// ran (the real server retries its read-modify-write the same way).
const PATCH_ATTEMPTS: usize = 5;

/// A PUT or PATCH of an existing object (or of its `status`): the new object
/// is built from the stored one, shown to the webhooks with the stored one as
/// `oldObject`, and written with the stored resourceVersion as precondition.
pub async fn update(
    state: &Shared,
    res: &'static Resource,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    edit: Edit<'_>,
) -> Result<(u16, Value), ApiError> {
    let write = Write {
        target: Target {
            res,
            operation: "UPDATE",
            subresource: sub.unwrap_or(""),
        },
        namespace: ns,
        name,
        patch: matches!(edit, Edit::Patch(..)),
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let old = state
            .store
            .lock()
            .get(res.storage, ns, name)
            .map(|o| view::view(res, o))
            .ok_or_else(|| ApiError::not_found(res, name))?;
        let new = match &edit {
            Edit::Replace(new) => new.clone(),
            Edit::Patch(body, ty) => patch::apply(&old, body, *ty)?,
        };
        let mutated = mutating_admission::admit(state, &write, new, Some(&old)).await?;
        let mut store = state.store.lock();
        let unchanged = store
            .get(res.storage, ns, name)
            .is_some_and(|o| objects::resource_version(o) == objects::resource_version(&old));
        if !unchanged && matches!(edit, Edit::Patch(..)) && attempt < PATCH_ATTEMPTS {
            continue;
        }
        return crud::update(&mut store, res, ns, name, mutated, sub);
    }
}
