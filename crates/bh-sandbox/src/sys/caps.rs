//! Capabilities: every one dropped (the command), or all but a few (the
//! init: `CAP_SYS_PTRACE`, and `CAP_NET_ADMIN` permitted, raised only
//! around the connect check's ioctls by [`net_admin`]). Raw syscalls only
//! (see the parent module's rules).

use libc::{c_int, c_long};

use super::errno;

const SECBITS_LOCKED_NOROOT: c_long = 0xef;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
pub(super) const CAP_NET_ADMIN: u32 = 12;
pub(super) const CAP_SYS_PTRACE: u32 = 19;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops every capability but those in `effective` and `permitted` (a bit
/// per capability below 32): the bounding set (so that no exec regains
/// one), the ambient set, then effective/permitted/inheritable, with the
/// securebits that keep uid 0 from regaining them locked.
pub(super) unsafe fn drop_capabilities(effective: u32, permitted: u32) -> bool {
    // SAFETY: prctl/capset with integer arguments and stack structs.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno() != libc::EINVAL {
                return false;
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
            || libc::prctl(libc::PR_SET_SECUREBITS, SECBITS_LOCKED_NOROOT, 0, 0, 0) != 0
        {
            return false;
        }
        set_capabilities(effective, permitted)
    }
}

/// capset(2): these effective and permitted sets, nothing inheritable.
fn set_capabilities(effective: u32, permitted: u32) -> bool {
    let mut head = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective,
            permitted,
            inheritable: 0,
        },
        CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset(2) with stack structs of the version-3 layout.
    unsafe { libc::syscall(libc::SYS_capset, &mut head as *mut CapHeader, data.as_ptr()) == 0 }
}

/// The init's `CAP_NET_ADMIN` made effective (`true`) or not again: it is
/// permitted only with a network namespace of the command's own, and
/// effective only around one `SIOCUNIXFILE` (never while a connect is
/// made for the command). False when it cannot be raised.
pub(super) fn net_admin(on: bool) -> bool {
    let permitted = 1 << CAP_SYS_PTRACE | 1 << CAP_NET_ADMIN;
    let effective = if on { permitted } else { 1 << CAP_SYS_PTRACE };
    set_capabilities(effective, permitted)
}
