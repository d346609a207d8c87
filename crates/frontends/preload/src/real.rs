//! The real libc functions, found with `dlsym(RTLD_NEXT, name)` at first use.

/// `real!(name: unsafe extern "C" fn(args) -> ret)` evaluates to `Option<fn pointer>`.
macro_rules! real {
    ($name:ident : $ty:ty) => {{
        static PTR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mut p = PTR.load(std::sync::atomic::Ordering::Relaxed);
        if p == 0 {
            // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the next definition
            // after this library (the real libc one).
            p = unsafe {
                libc::dlsym(
                    libc::RTLD_NEXT,
                    concat!(stringify!($name), "\0").as_ptr().cast(),
                )
            } as usize;
            PTR.store(p, std::sync::atomic::Ordering::Relaxed);
        }
        if p == 0 {
            None
        } else {
            // SAFETY: the symbol is the libc function of that name, whose C prototype is $ty.
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

/// Call the real function, or fail with ENOSYS (as `-1` of the return type) if libc lacks it.
macro_rules! call_real {
    ($name:ident : $ty:ty, $($arg:expr),* ) => {{
        match crate::real::real!($name: $ty) {
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            Some(f) => unsafe { f($($arg),*) },
            None => {
                crate::set_errno(libc::ENOSYS);
                (-1i8).into()
            }
        }
    }};
}

pub(crate) use {call_real, real};
