//! Which paths are the shim's: a path is walked component by component against the prefix,
//! the way the kernel would walk it if the prefix were a directory, and routed to the store,
//! to the kernel as it is, or to the kernel respelled.
//!
//! The walk is lexical outside the store (the shim does not resolve the host's symbolic links)
//! and leaves every step inside the store to the store's own walk: what follows the last
//! entry into the prefix is handed over as it was written, so `f/..` and a trailing slash
//! on a file fail there with ENOTDIR as they do in the kernel.

/// Where a path goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The shim's: this path inside the store (from the last entry into the prefix on, as
    /// written: `..`, `.` and a trailing slash are the store walk's to interpret).
    Ours(Vec<u8>),
    /// Not the shim's and never spelled through the prefix: the kernel gets the call as made.
    Kernel,
    /// Not the shim's, but the path went through the prefix (or starts in a shim directory)
    /// before leaving it: the kernel gets this absolute path instead — where the path left
    /// the prefix, then the rest as written.
    KernelAs(Vec<u8>),
}

/// The components of an absolute path with the byte offset just past each.
fn components(path: &[u8]) -> impl Iterator<Item = (&[u8], usize)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        while start < path.len() {
            let end = path[start..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(path.len(), |i| start + i);
            let part = &path[start..end];
            start = end + 1;
            if !part.is_empty() {
                return Some((part, end));
            }
        }
        None
    })
}

/// Route an absolute path against one prefix (absolute, normalised: no `.`, `..` or empty
/// components, no trailing slash).
pub(crate) fn route_one(full: &[u8], prefix: &[u8]) -> Route {
    let pre: Vec<&[u8]> = components(prefix).map(|(c, _)| c).collect();
    let mut stack: Vec<&[u8]> = Vec::new();
    // Offset where the part after the last entry into the prefix begins.
    let mut entered_at: Option<usize> = None;
    // Where the walk last left the prefix: the stack then, and the offset of the rest.
    let mut left: Option<(Vec<&[u8]>, usize)> = None;
    let inside = |stack: &[&[u8]]| stack.len() >= pre.len() && stack[..pre.len()] == pre[..];
    for (part, end) in components(full) {
        match part {
            b"." => {}
            b".." => {
                let was_inside = inside(&stack);
                stack.pop();
                if was_inside && !inside(&stack) {
                    left = Some((stack.clone(), end));
                }
            }
            name => {
                stack.push(name);
                if stack.len() == pre.len() && inside(&stack) {
                    entered_at = Some(end);
                }
            }
        }
    }
    // The root as a prefix: every absolute path is inside.
    if pre.is_empty() {
        return Route::Ours(full.to_vec());
    }
    match (entered_at, inside(&stack)) {
        (Some(at), true) => {
            let mut inner = b"/".to_vec();
            inner.extend_from_slice(&full[at..]);
            Route::Ours(inner)
        }
        (Some(_), false) => {
            // Entered and not inside at the end: it left, so `left` is set.
            let Some((base, at)) = left else {
                return Route::Kernel;
            };
            let mut out = Vec::with_capacity(full.len());
            for part in base {
                out.push(b'/');
                out.extend_from_slice(part);
            }
            if out.is_empty() {
                out.push(b'/');
            }
            out.extend_from_slice(&full[at..]);
            Route::KernelAs(out)
        }
        (None, _) => Route::Kernel,
    }
}

/// Route against every spelling of the prefix (as given, and with its symbolic links
/// resolved): the store if any spelling takes it, else the first respelling, else the kernel.
pub(crate) fn route(full: &[u8], prefixes: &[Vec<u8>]) -> Route {
    let mut out = Route::Kernel;
    for prefix in prefixes {
        match route_one(full, prefix) {
            ours @ Route::Ours(_) => return ours,
            again @ Route::KernelAs(_) if out == Route::Kernel => out = again,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(p: &str) -> Route {
        Route::Ours(p.as_bytes().to_vec())
    }
    fn kernel_as(p: &str) -> Route {
        Route::KernelAs(p.as_bytes().to_vec())
    }
    fn r(path: &str) -> Route {
        route_one(path.as_bytes(), b"/a/store")
    }

    #[test]
    fn inside_paths_keep_their_spelling_for_the_store_walk() {
        assert_eq!(r("/a/store"), ours("/"));
        assert_eq!(r("/a/store/"), ours("//"));
        assert_eq!(r("/a/store/f"), ours("//f"));
        assert_eq!(r("//a//store//f/"), ours("///f/"));
        assert_eq!(r("/a/./store/d/../f"), ours("//d/../f"));
        assert_eq!(r("/a/store/f/.."), ours("//f/.."));
        assert_eq!(r("/a/store/d/../../store/g"), ours("//g"));
    }

    #[test]
    fn paths_that_leave_are_respelled_where_they_left() {
        assert_eq!(r("/a/store/.."), kernel_as("/a"));
        assert_eq!(r("/a/store/../x"), kernel_as("/a/x"));
        assert_eq!(
            r("/a/store/d/../../../etc/f/../p"),
            kernel_as("/a/../etc/f/../p")
        );
        assert_eq!(r("/a/store/../../../.."), kernel_as("/a/../../.."));
    }

    #[test]
    fn paths_that_never_enter_go_to_the_kernel_untouched() {
        assert_eq!(r("/a/storex/f"), Route::Kernel);
        assert_eq!(r("/a/stor"), Route::Kernel);
        assert_eq!(r("/a"), Route::Kernel);
        assert_eq!(r("/b/../a/x"), Route::Kernel);
        assert_eq!(r("/"), Route::Kernel);
    }

    #[test]
    fn entering_from_outside_counts() {
        assert_eq!(r("/b/../a/store/f"), ours("//f"));
        assert_eq!(r("/a/x/../store/f"), ours("//f"));
    }

    #[test]
    fn any_spelling_of_the_prefix_serves() {
        let prefixes = [b"/l/store".to_vec(), b"/a/store".to_vec()];
        assert_eq!(route(b"/l/store/f", &prefixes), ours("//f"));
        assert_eq!(route(b"/a/store/f", &prefixes), ours("//f"));
        assert_eq!(route(b"/a/store/../x", &prefixes), kernel_as("/a/x"));
        assert_eq!(route(b"/z", &prefixes), Route::Kernel);
    }
}
