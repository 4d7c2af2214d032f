import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process, for the tests that run one (a helper, the CLI, a test server), with the
/// part of `Process`'s interface they use. It is spawned with `posix_spawn`: Foundation's
/// `Process.run()` on Linux lists `/proc/self/fd` with a 256-byte copy of each directory entry,
/// which reads past glibc's buffer when an entry ends a page (swift-corelibs-foundation pull
/// request 5472, fixed after Swift 6.3.1), and it crashed this suite with a bad pointer
/// dereference in `Process.run()`.
///
/// The child gets the standard output and error given (a `Pipe`'s write end, or a
/// `FileHandle`), this process's standard input, no other descriptor
/// (`posix_spawn_file_actions_addclosefrom_np`), an empty signal mask and `SIGPIPE` at its
/// default (a test thread may block or ignore signals, and the child would inherit that).
final class ChildProcess: @unchecked Sendable {
    /// The program to run.
    var executableURL: URL?
    /// Its arguments (without the program's name).
    var arguments: [String] = []
    /// Its environment; this process's when nil.
    var environment: [String: String]?
    /// Its working directory; this process's when nil.
    var currentDirectoryURL: URL?
    /// A `Pipe` or a `FileHandle` for the child's standard output; this process's when nil.
    var standardOutput: Any?
    /// A `Pipe` or a `FileHandle` for the child's standard error; this process's when nil.
    var standardError: Any?

    private let lock = NSLock()
    private var pid: pid_t = 0
    private var exitStatus: Int32?

    /// The child's process ID (0 before `run()`).
    var processIdentifier: Int32 { lock.withLock { pid } }

    /// Starts the child; throws when it cannot be spawned.
    func run() throws {
        guard let executableURL else { throw POSIXError(.ENOENT) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let descriptor = Self.writeDescriptor(standardOutput) {
            posix_spawn_file_actions_adddup2(&actions, descriptor, 1)
        }
        if let descriptor = Self.writeDescriptor(standardError) {
            posix_spawn_file_actions_adddup2(&actions, descriptor, 2)
        }
        if let currentDirectoryURL, Self.addChdir(&actions, currentDirectoryURL.path) != 0 {
            throw POSIXError(.EINVAL)
        }
        guard Self.addCloseFrom(&actions, 3) == 0 else { throw POSIXError(.EINVAL) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let path = executableURL.path
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp = variables.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let code = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard code == 0 else { throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO) }
        lock.withLock { pid = child }
        // The parent's copies of the pipes' write ends: the reader sees the end of the output
        // when the child (and only the child) has closed them.
        for stream in [standardOutput, standardError] {
            if let pipe = stream as? Pipe { try? pipe.fileHandleForWriting.close() }
        }
    }

    // glibc 2.34's `posix_spawn_file_actions_addclosefrom_np` and 2.29's
    // `posix_spawn_file_actions_addchdir_np` are not in Swift's Glibc module (they are GNU
    // extensions): looked up by name.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>)
        -> Int32
    private static let addCloseFrom = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")!,
        to: AddCloseFrom.self)
    private static let addChdir = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np")!, to: AddChdir.self)

    private static func writeDescriptor(_ stream: Any?) -> Int32? {
        if let pipe = stream as? Pipe { return pipe.fileHandleForWriting.fileDescriptor }
        if let handle = stream as? FileHandle { return handle.fileDescriptor }
        return nil
    }

    /// Whether the child has not exited yet (it is reaped when it has).
    var isRunning: Bool {
        lock.withLock {
            guard pid != 0, exitStatus == nil else { return false }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { exitStatus = status }
            return exitStatus == nil
        }
    }

    /// Waits until the child has exited (polling every 5 ms).
    func waitUntilExit() {
        while isRunning { usleep(5_000) }
    }

    /// The exit code, or the number of the signal that ended the child (as `Process` reports
    /// it); 0 while it runs.
    var terminationStatus: Int32 {
        lock.withLock {
            guard let status = exitStatus else { return 0 }
            let signal = status & 0x7F
            return signal == 0 ? (status >> 8) & 0xFF : signal
        }
    }

    /// Sends `SIGTERM`.
    func terminate() {
        let child = processIdentifier
        if child != 0, isRunning { kill(child, SIGTERM) }
    }
}
