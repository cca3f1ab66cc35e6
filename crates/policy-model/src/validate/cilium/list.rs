//! The model's lists are `Option<Vec<_>>` (Cilium tells nil from empty);
//! most checks only ask whether a list has an entry.

pub(super) fn non_empty<T>(list: Option<&Vec<T>>) -> bool {
    list.is_some_and(|l| !l.is_empty())
}
