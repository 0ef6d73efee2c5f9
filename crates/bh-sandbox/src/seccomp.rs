//! The seccomp program the command runs under: a short deny-list for what
//! Landlock does not mediate, built by the parent as classic BPF (installed
//! by `sys::command`, after Landlock and the capability drop).
//!
//! Denied with `EPERM`: the new mount API (`fsopen`, `fsconfig`, `fsmount`,
//! `fspick`, `move_mount`, `open_tree`, `open_tree_attr`, `mount_setattr`),
//! `open_by_handle_at`, `ptrace`, `process_vm_writev`, `keyctl`, `add_key`,
//! `request_key`, `init_module`, `finit_module`, `delete_module`, `bpf`, and
//! `ioctl` with `TIOCSTI` or `TIOCLINUX`. A foreign architecture (e.g. i386
//! through `int 0x80`) kills the process; x32 system calls are denied. On
//! request ([`crate::Policy::deny_unix_sockets`]) `socket(AF_UNIX, …)` and
//! `io_uring_setup` (whose rings make sockets past this filter) fail with
//! `EACCES`.

use libc::sock_filter;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

// struct seccomp_data: nr @0, arch @4, instruction_pointer @8, args @16.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[0] (little-endian): `socket(2)`'s domain.
const OFF_ARG0_LO: u32 = 16;
/// Low 32 bits of args[1] (little-endian); the kernel reads an ioctl's
/// request as an unsigned int.
const OFF_ARG1_LO: u32 = 16 + 8;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541c;
const OPEN_TREE_ATTR: u32 = 467;

/// The system calls denied outright.
fn denied() -> Vec<u32> {
    let nrs = [
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_mount_setattr,
        libc::SYS_open_by_handle_at,
        libc::SYS_ptrace,
        libc::SYS_process_vm_writev,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_bpf,
    ];
    let mut v: Vec<u32> = nrs.iter().map(|n| *n as u32).collect();
    v.push(OPEN_TREE_ATTR);
    v
}

/// Where a jump of the program goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    /// The next instruction.
    Next,
    /// Past the kill of a foreign architecture.
    Native,
    Allow,
    /// `EPERM`.
    Deny,
    /// `EACCES`: a Unix socket under [`crate::Policy::deny_unix_sockets`].
    DenyUnix,
    /// The `socket(2)` check after the ioctl one.
    SocketCheck,
}

/// The program as it is written: plain statements and jumps to labels,
/// resolved into relative offsets by [`Asm::finish`].
struct Asm {
    code: Vec<sock_filter>,
    jumps: Vec<(usize, Label, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        });
    }

    fn jump(&mut self, code: u16, k: u32, jt: Label, jf: Label) {
        self.jumps.push((self.code.len(), jt, jf));
        self.stmt(code, k);
    }

    fn label(&mut self, l: Label) {
        self.labels.push((l, self.code.len()));
    }

    /// The program with every jump's offset counted from the instruction
    /// after it. A jump past 255 instructions cannot be written in classic
    /// BPF; the program stays far below that.
    fn finish(mut self) -> Vec<sock_filter> {
        let at = |labels: &[(Label, usize)], l: Label, from: usize| -> u8 {
            if l == Label::Next {
                return 0;
            }
            let to = labels
                .iter()
                .find(|(k, _)| *k == l)
                .map_or(from + 1, |(_, i)| *i);
            u8::try_from(to - from - 1).unwrap_or(0)
        };
        for (i, jt, jf) in std::mem::take(&mut self.jumps) {
            self.code[i].jt = at(&self.labels, jt, i);
            self.code[i].jf = at(&self.labels, jf, i);
        }
        self.code
    }
}

/// The program, ready for `PR_SET_SECCOMP`. With `deny_unix_sockets`,
/// `socket(AF_UNIX, …)` fails with `EACCES` too (`socketpair` still works):
/// the peers' way to keep a command from every host Unix socket, those a
/// server binds after the start included, at the cost of its own.
pub(crate) fn program(deny_unix_sockets: bool) -> Vec<sock_filter> {
    let mut a = Asm {
        code: Vec::new(),
        jumps: Vec::new(),
        labels: Vec::new(),
    };
    a.stmt(BPF_LD_W_ABS, OFF_ARCH);
    a.jump(BPF_JEQ_K, AUDIT_ARCH, Label::Native, Label::Next);
    a.stmt(BPF_RET_K, RET_KILL_PROCESS);
    a.label(Label::Native);
    a.stmt(BPF_LD_W_ABS, OFF_NR);
    #[cfg(target_arch = "x86_64")]
    a.jump(BPF_JGE_K, X32_SYSCALL_BIT, Label::Deny, Label::Next);
    for nr in denied() {
        a.jump(BPF_JEQ_K, nr, Label::Deny, Label::Next);
    }
    a.jump(
        BPF_JEQ_K,
        libc::SYS_ioctl as u32,
        Label::Next,
        Label::SocketCheck,
    );
    a.stmt(BPF_LD_W_ABS, OFF_ARG1_LO);
    a.jump(BPF_JEQ_K, TIOCSTI, Label::Deny, Label::Next);
    a.jump(BPF_JEQ_K, TIOCLINUX, Label::Deny, Label::Allow);
    a.label(Label::SocketCheck);
    if deny_unix_sockets {
        // io_uring makes sockets and connects without the `socket(2)` and
        // `connect(2)` calls this filter sees (IORING_OP_SOCKET): no rings.
        a.jump(
            BPF_JEQ_K,
            libc::SYS_io_uring_setup as u32,
            Label::DenyUnix,
            Label::Next,
        );
        a.jump(
            BPF_JEQ_K,
            libc::SYS_socket as u32,
            Label::Next,
            Label::Allow,
        );
        a.stmt(BPF_LD_W_ABS, OFF_ARG0_LO);
        a.jump(
            BPF_JEQ_K,
            libc::AF_UNIX as u32,
            Label::DenyUnix,
            Label::Allow,
        );
    }
    a.label(Label::Allow);
    a.stmt(BPF_RET_K, RET_ALLOW);
    a.label(Label::Deny);
    a.stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32);
    a.label(Label::DenyUnix);
    a.stmt(BPF_RET_K, RET_ERRNO | libc::EACCES as u32);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where instruction `i`'s jump goes when taken (`true`) or not.
    fn target(p: &[sock_filter], i: usize, taken: bool) -> usize {
        i + 1 + usize::from(if taken { p[i].jt } else { p[i].jf })
    }

    fn is_jump(f: &sock_filter) -> bool {
        f.code == BPF_JEQ_K || f.code == BPF_JGE_K
    }

    #[test]
    fn every_jump_lands_inside_and_each_check_on_its_verdict() {
        for deny_unix in [false, true] {
            let p = program(deny_unix);
            for (i, f) in p.iter().enumerate() {
                if is_jump(f) {
                    assert!(target(&p, i, true) < p.len() && target(&p, i, false) < p.len());
                }
            }
            let ret = |i: usize| (p[i].code == BPF_RET_K).then_some(p[i].k);
            let eperm = Some(RET_ERRNO | libc::EPERM as u32);
            // A foreign architecture is killed.
            assert_eq!(ret(target(&p, 1, false)), Some(RET_KILL_PROCESS));
            for nr in denied() {
                let i = p
                    .iter()
                    .position(|f| f.code == BPF_JEQ_K && f.k == nr)
                    .unwrap();
                assert_eq!(ret(target(&p, i, true)), eperm, "syscall {nr}");
            }
            for req in [TIOCSTI, TIOCLINUX] {
                let i = p
                    .iter()
                    .position(|f| f.code == BPF_JEQ_K && f.k == req)
                    .unwrap();
                assert_eq!(ret(target(&p, i, true)), eperm, "ioctl {req:#x}");
            }
            let unix = p
                .iter()
                .position(|f| f.code == BPF_JEQ_K && f.k == libc::AF_UNIX as u32);
            match (deny_unix, unix) {
                (true, Some(i)) => {
                    assert_eq!(
                        ret(target(&p, i, true)),
                        Some(RET_ERRNO | libc::EACCES as u32)
                    );
                    assert_eq!(ret(target(&p, i, false)), Some(RET_ALLOW));
                }
                (false, None) => {}
                other => panic!("the AF_UNIX check is there only on request: {other:?}"),
            }
            let ring = p
                .iter()
                .position(|f| f.code == BPF_JEQ_K && f.k == libc::SYS_io_uring_setup as u32);
            match (deny_unix, ring) {
                (true, Some(i)) => assert_eq!(
                    ret(target(&p, i, true)),
                    Some(RET_ERRNO | libc::EACCES as u32)
                ),
                (false, None) => {}
                other => panic!("io_uring is refused only with the Unix sockets: {other:?}"),
            }
        }
    }
}
