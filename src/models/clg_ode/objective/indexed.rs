//! [`indexed_enum!`]: a field-less enum whose declaration is its list, for the objective's
//! [`Term`](super::Term) and [`Stat`](super::stats::Stat): every variant in `ALL` (declaration
//! order), their number `COUNT`, each variant's `index()` in `ALL` (for arrays indexed by the
//! enum) and one value per variant from a `match` written beside the variants. Adding a
//! variant is one line; no size is written by hand.

/// Declares `enum $Enum` and `impl $Enum { ALL, COUNT, index(), $f() }` from
/// `Variant => value` lines, `value` being `$f(self)`'s value for that variant.
macro_rules! indexed_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Enum:ident => fn $f:ident(self) -> $Ty:ty {
            $( $(#[$vmeta:meta])* $Variant:ident => $value:expr, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $Enum {
            $( $(#[$vmeta])* $Variant, )+
        }

        impl $Enum {
            /// Every variant, in declaration order.
            pub(crate) const ALL: [$Enum; [$(stringify!($Variant)),+].len()] = [$($Enum::$Variant),+];
            /// The number of variants.
            pub(crate) const COUNT: usize = Self::ALL.len();

            /// The variant's position in [`Self::ALL`].
            pub(crate) const fn index(self) -> usize {
                self as usize
            }

            #[doc = concat!("The variant's `", stringify!($Ty), "`.")]
            pub(crate) const fn $f(self) -> $Ty {
                match self {
                    $( $Enum::$Variant => $value, )+
                }
            }
        }
    };
}

pub(crate) use indexed_enum;
