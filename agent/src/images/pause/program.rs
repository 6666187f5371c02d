//! The pause program: a static Linux ELF executable of a few hundred bytes, for the
//! architectures the embedded pause image supports, written here byte by byte (no toolchain
//! builds it).
//!
//! What it does, as the kubelet's `pause` does: it blocks SIGINT, SIGTERM and SIGCHLD and waits
//! for them with `rt_sigtimedwait` (blocked signals reach PID 1 of a PID namespace even without
//! a handler; the kernel drops only unblocked, unhandled ones); SIGINT or SIGTERM ends it with
//! status 0, SIGCHLD reaps every exited child (`wait4(-1, NULL, WNOHANG, NULL)` until none is
//! left). It never returns otherwise: no libc, no stack use beyond its signal set.
//!
//! The machine code was assembled with `llvm-mc` from the listings below; the tests run the
//! host's variant and check its exit status on SIGTERM.

/// x86_64 (amd64). Listing (Intel syntax):
/// ```text
///  0: push 0x14002          ; the set {SIGINT, SIGTERM, SIGCHLD} on the stack
///  5: xor edi, edi          ; SIG_BLOCK
///  7: mov rsi, rsp
///  a: xor edx, edx
///  c: mov r10d, 8
/// 12: mov eax, 14           ; rt_sigprocmask(SIG_BLOCK, set, NULL, 8)
/// 17: syscall
/// 19: wait: mov rdi, rsp
/// 1c: xor esi, esi
/// 1e: xor edx, edx
/// 20: mov r10d, 8
/// 26: mov eax, 128          ; rt_sigtimedwait(set, NULL, NULL, 8)
/// 2b: syscall
/// 2d: cmp eax, 17           ; SIGCHLD?
/// 30: jne other
/// 32: reap: mov edi, -1
/// 37: xor esi, esi
/// 39: mov edx, 1            ; WNOHANG
/// 3e: xor r10d, r10d
/// 41: mov eax, 61           ; wait4(-1, NULL, WNOHANG, NULL)
/// 46: syscall
/// 48: test eax, eax
/// 4a: jg reap               ; reaped one: try the next
/// 4c: jmp wait
/// 4e: other: cmp eax, 2     ; SIGINT?
/// 51: je done
/// 53: cmp eax, 15           ; SIGTERM?
/// 56: jne wait              ; (EINTR and the like: wait again)
/// 58: done: xor edi, edi
/// 5a: mov eax, 231          ; exit_group(0)
/// 5f: syscall
/// ```
const X86_64: &[u8] = &[
    0x68, 0x02, 0x40, 0x01, 0x00, // push 0x14002
    0x31, 0xff, // xor edi, edi
    0x48, 0x89, 0xe6, // mov rsi, rsp
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x08, 0x00, 0x00, 0x00, // mov r10d, 8
    0xb8, 0x0e, 0x00, 0x00, 0x00, // mov eax, 14
    0x0f, 0x05, // syscall
    0x48, 0x89, 0xe7, // wait: mov rdi, rsp
    0x31, 0xf6, // xor esi, esi
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x08, 0x00, 0x00, 0x00, // mov r10d, 8
    0xb8, 0x80, 0x00, 0x00, 0x00, // mov eax, 128
    0x0f, 0x05, // syscall
    0x83, 0xf8, 0x11, // cmp eax, 17
    0x75, 0x1c, // jne other
    0xbf, 0xff, 0xff, 0xff, 0xff, // reap: mov edi, -1
    0x31, 0xf6, // xor esi, esi
    0xba, 0x01, 0x00, 0x00, 0x00, // mov edx, 1
    0x45, 0x31, 0xd2, // xor r10d, r10d
    0xb8, 0x3d, 0x00, 0x00, 0x00, // mov eax, 61
    0x0f, 0x05, // syscall
    0x85, 0xc0, // test eax, eax
    0x7f, 0xe6, // jg reap
    0xeb, 0xcb, // jmp wait
    0x83, 0xf8, 0x02, // other: cmp eax, 2
    0x74, 0x05, // je done
    0x83, 0xf8, 0x0f, // cmp eax, 15
    0x75, 0xc1, // jne wait
    0x31, 0xff, // done: xor edi, edi
    0xb8, 0xe7, 0x00, 0x00, 0x00, // mov eax, 231
    0x0f, 0x05, // syscall
];

/// aarch64 (arm64), the same steps (little-endian instruction words):
/// ```text
///  0: mov x0, #0x4002
///  4: movk x0, #0x1, lsl #16    ; x0 = the set {SIGINT, SIGTERM, SIGCHLD}
///  8: str x0, [sp, #-16]!
///  c: mov x0, #0                ; SIG_BLOCK
/// 10: mov x1, sp
/// 14: mov x2, #0
/// 18: mov x3, #8
/// 1c: mov x8, #135              ; rt_sigprocmask
/// 20: svc #0
/// 24: wait: mov x0, sp
/// 28: mov x1, #0
/// 2c: mov x2, #0
/// 30: mov x3, #8
/// 34: mov x8, #137              ; rt_sigtimedwait
/// 38: svc #0
/// 3c: cmp w0, #17
/// 40: b.ne other
/// 44: reap: mov x0, #-1
/// 48: mov x1, #0
/// 4c: mov x2, #1                ; WNOHANG
/// 50: mov x3, #0
/// 54: mov x8, #260              ; wait4
/// 58: svc #0
/// 5c: cmp w0, #0
/// 60: b.gt reap
/// 64: b wait
/// 68: other: cmp w0, #2
/// 6c: b.eq done
/// 70: cmp w0, #15
/// 74: b.ne wait
/// 78: done: mov x0, #0
/// 7c: mov x8, #94               ; exit_group
/// 80: svc #0
/// ```
const AARCH64: [u32; 33] = [
    0xd2880040, 0xf2a00020, 0xf81f0fe0, 0xd2800000, 0x910003e1, 0xd2800002, 0xd2800103, 0xd28010e8,
    0xd4000001, 0x910003e0, 0xd2800001, 0xd2800002, 0xd2800103, 0xd2801128, 0xd4000001, 0x7100441f,
    0x54000141, 0x92800000, 0xd2800001, 0xd2800022, 0xd2800003, 0xd2802088, 0xd4000001, 0x7100001f,
    0x54ffff2c, 0x17fffff0, 0x7100081f, 0x54000060, 0x71003c1f, 0x54fffd81, 0xd2800000, 0xd2800bc8,
    0xd4000001,
];

/// An architecture the embedded pause image exists for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86-64 (OCI `amd64`, Rust's `x86_64`).
    Amd64,
    /// 64-bit ARM (OCI `arm64`, Rust's `aarch64`).
    Arm64,
}

impl Arch {
    /// This machine's, if the embedded pause image supports it.
    pub fn host() -> Option<Arch> {
        Arch::from_rust(std::env::consts::ARCH)
    }

    /// From Rust's name of an architecture (`std::env::consts::ARCH`).
    pub fn from_rust(arch: &str) -> Option<Arch> {
        match arch {
            "x86_64" => Some(Arch::Amd64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// The OCI platform's `architecture`.
    pub fn oci(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    fn elf_machine(self) -> u16 {
        match self {
            Arch::Amd64 => 0x3e,
            Arch::Arm64 => 0xb7,
        }
    }

    fn code(self) -> Vec<u8> {
        match self {
            Arch::Amd64 => X86_64.to_vec(),
            Arch::Arm64 => AARCH64.iter().flat_map(|w| w.to_le_bytes()).collect(),
        }
    }
}

/// Where the one segment (headers and code) is loaded: above `vm.mmap_min_addr`, aligned for
/// 64 KiB pages.
const BASE: u64 = 0x40_0000;
const ELF_HEADER_SIZE: u16 = 64;
const PROGRAM_HEADER_SIZE: u16 = 56;

/// The executable for `arch`: an ELF64 header, one read+execute `PT_LOAD` program header
/// covering the whole file, then the code, which is the entry point.
pub fn elf(arch: Arch) -> Vec<u8> {
    let code = arch.code();
    let headers = u64::from(ELF_HEADER_SIZE + PROGRAM_HEADER_SIZE);
    let size = headers + code.len() as u64;
    let mut f = Vec::with_capacity(size as usize);
    // e_ident: magic, 64-bit, little endian, version 1, System V ABI, padding.
    f.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&2u16.to_le_bytes()); // e_type: ET_EXEC
    f.extend_from_slice(&arch.elf_machine().to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes()); // e_version
    f.extend_from_slice(&(BASE + headers).to_le_bytes()); // e_entry
    f.extend_from_slice(&u64::from(ELF_HEADER_SIZE).to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff: no sections
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    f.extend_from_slice(&ELF_HEADER_SIZE.to_le_bytes());
    f.extend_from_slice(&PROGRAM_HEADER_SIZE.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes()); // e_phnum
    f.extend_from_slice(&[0; 6]); // e_shentsize, e_shnum, e_shstrndx
    f.extend_from_slice(&1u32.to_le_bytes()); // p_type: PT_LOAD
    f.extend_from_slice(&5u32.to_le_bytes()); // p_flags: R + X
    f.extend_from_slice(&0u64.to_le_bytes()); // p_offset
    f.extend_from_slice(&BASE.to_le_bytes()); // p_vaddr
    f.extend_from_slice(&BASE.to_le_bytes()); // p_paddr
    f.extend_from_slice(&size.to_le_bytes()); // p_filesz
    f.extend_from_slice(&size.to_le_bytes()); // p_memsz
    f.extend_from_slice(&0x1_0000u64.to_le_bytes()); // p_align
    f.extend_from_slice(&code);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    #[test]
    fn the_headers_describe_the_file() {
        for arch in [Arch::Amd64, Arch::Arm64] {
            let f = elf(arch);
            assert_eq!(&f[..4], b"\x7fELF");
            assert_eq!(u16::from_le_bytes([f[18], f[19]]), arch.elf_machine());
            let entry = u64::from_le_bytes(f[24..32].try_into().unwrap());
            assert_eq!(entry, BASE + 120, "the code follows the two headers");
            let filesz = u64::from_le_bytes(f[96..104].try_into().unwrap());
            assert_eq!(filesz, f.len() as u64);
        }
        assert_eq!(elf(Arch::Arm64).len(), 120 + 33 * 4);
        assert_eq!(elf(Arch::Amd64).len(), 120 + 0x61);
    }

    /// Runs the host's pause (not as PID 1: a SIGTERM it did not block would kill it, so
    /// exit status 0 shows it waited for the signal and exited on its own).
    #[test]
    fn the_host_pause_runs_until_sigterm_and_exits_zero() {
        let Some(arch) = Arch::host() else {
            panic!("no embedded pause for {}", std::env::consts::ARCH);
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pause");
        std::fs::write(&path, elf(arch)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut child = std::process::Command::new(&path).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none(), "pause keeps running");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::CHILD).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            child.try_wait().unwrap().is_none(),
            "SIGCHLD does not end it"
        );
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "pause did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.signal(), None, "{status:?}");
        assert_eq!(status.code(), Some(0), "{status:?}");
    }
}
