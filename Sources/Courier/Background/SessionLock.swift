@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation

/// One live background session per identifier, in this process and across processes: a POSIX
/// write lock (`fcntl(F_SETLK)`) on `session.lock` in the session's directory, held while the
/// manager lives, and a process-wide list of the lock files this process holds.
///
/// Why these and not `flock(2)`: an `flock` lock belongs to the open file description, and
/// every child process this one spawns shares that description from its `fork` until its
/// `exec` closes the descriptor. A manager released while another thread spawns a process
/// would leave its identifier locked for that moment (or for good, were the child never to
/// `exec`), and a new manager would be refused. A POSIX lock belongs to the process: children
/// do not inherit it, and the kernel drops it when the process dies, however it dies, so a
/// crash never leaves a stale lock behind.
///
/// A POSIX lock does not exclude the process that holds it, and closing *any* descriptor of
/// the file drops it, so within the process the list decides: a lock file on it is refused
/// without being opened. Taking and releasing happen under the list's lock, so a release's
/// `close` never falls between another manager's `open` and its lock.
final class SessionLock: Sendable {
    /// A lock file, by device and inode, so that two paths to one file are one identifier.
    private struct FileIdentity: Hashable {
        let device: UInt64
        let inode: UInt64

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
        }
    }

    /// The lock files this process holds. Its lock also guards every `open`, `fcntl` and
    /// `close` of a lock file.
    private static let held = Locked(Set<FileIdentity>())

    /// The locked file's descriptor and identity; nil once released. Changed only under `held`'s
    /// lock.
    private let state: Locked<(descriptor: Int32, identity: FileIdentity)?>

    private init(descriptor: Int32, identity: FileIdentity) {
        self.state = Locked((descriptor, identity))
    }

    /// Takes the lock for the session in `directory`, creating the directory when needed.
    static func acquire(in directory: URL, identifier: String) throws(CourierError) -> SessionLock {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw .fileSystem(.init(url: directory, message: "Cannot create \(directory.path): \(error)"))
        }
        let path = directory.appendingPathComponent("session.lock").path
        let inUse = CourierError.sessionIdentifierInUse(
            .init(
                message:
                    "Another live session (in this process or another) uses the background identifier "
                    + "\"\(identifier)\"; release it first"))
        return try held.withLock { (held) throws(CourierError) -> SessionLock in
            // Held here: refused without opening the file, whose closing would drop the lock.
            var status = stat()
            if stat(path, &status) == 0, held.contains(FileIdentity(status)) { throw inUse }

            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                throw .fileSystem(
                    .init(url: directory, message: "Cannot open \(path): \(String(cString: strerror(errno)))"))
            }
            guard fstat(descriptor, &status) == 0, !held.contains(FileIdentity(status)) else {
                // Only when another process put a file this process holds in the path's place
                // between `stat` and `open`; closing this descriptor dropped that lock.
                close(descriptor)
                throw inUse
            }
            var request = flock(l_type: Int16(F_WRLCK), l_whence: Int16(SEEK_SET), l_start: 0, l_len: 0, l_pid: 0)
            guard fcntl(descriptor, F_SETLK, &request) == 0 else {
                let reason = errno
                close(descriptor)
                if reason == EAGAIN || reason == EACCES { throw inUse }
                throw .fileSystem(
                    .init(url: directory, message: "Cannot lock \(path): \(String(cString: strerror(reason)))"))
            }
            let identity = FileIdentity(status)
            held.insert(identity)
            return SessionLock(descriptor: descriptor, identity: identity)
        }
    }

    /// Lets another session take the identifier. Idempotent.
    func release() {
        Self.held.withLock { held in
            state.withLock { state in
                guard let (descriptor, identity) = state else { return }
                close(descriptor)  // drops the process's lock on the file
                held.remove(identity)
                state = nil
            }
        }
    }

    deinit {
        release()
    }
}
