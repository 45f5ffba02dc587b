//! One loop, run with the widest vector instructions the processor has: AVX-512F, AVX2 or the
//! x86-64 baseline, chosen at run time (the detection is cached by the standard library). The
//! loops that use it (the random-stopping sampler's pass and correction, SANSA's block scoring) are
//! written so that every build performs the same IEEE operations in the same order — no fused
//! multiply-add is enabled — and so gives the same bits; each has a test that says so.

/// `widest! { fn name(args) -> Ret = body, avx512: name_512, avx2: name_2 }` defines `name`, which
/// calls `body` (an `#[inline(always)]` function with the same signature, optionally with one
/// `const` generic) compiled for AVX-512F (`name_512`) or AVX2 (`name_2`) when the processor has
/// them, and `body` as it is otherwise. The two builds are named so that tests can compare them.
macro_rules! widest {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident $(<const $c:ident: usize>)? ( $($arg:ident: $ty:ty),* $(,)? )
            $(-> $ret:ty)? = $body:ident, avx512: $w512:ident, avx2: $w2:ident
    ) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f")]
        fn $w512 $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? {
            $body $(::<$c>)? ($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $w2 $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? {
            $body $(::<$c>)? ($($arg),*)
        }

        $(#[$meta])*
        $vis fn $name $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the processor has AVX-512F (checked just above).
                    return unsafe { $w512 $(::<$c>)? ($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the processor has AVX2 (checked just above).
                    return unsafe { $w2 $(::<$c>)? ($($arg),*) };
                }
            }
            $body $(::<$c>)? ($($arg),*)
        }
    };
}

pub(crate) use widest;
