@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation

/// One live background session per identifier, in this process and across processes: an
/// exclusive `flock(2)` on `session.lock` in the session's directory, held while the manager
/// lives.
///
/// `flock` locks belong to an open file description, so a second manager in the same process
/// is refused as surely as one in another process; the kernel drops the lock when the process
/// dies, however it dies, so a crash never leaves a stale lock behind.
final class SessionLock: Sendable {
    /// The locked file's descriptor; -1 once released. Guarded by its lock.
    private let descriptor: Locked<Int32>

    private init(descriptor: Int32) {
        self.descriptor = Locked(descriptor)
    }

    /// Takes the lock for the session in `directory`, creating the directory when needed.
    static func acquire(in directory: URL, identifier: String) throws(CourierError) -> SessionLock {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw .fileSystem(.init(url: directory, message: "Cannot create \(directory.path): \(error)"))
        }
        let path = directory.appendingPathComponent("session.lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .fileSystem(
                .init(url: directory, message: "Cannot open \(path): \(String(cString: strerror(errno)))"))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            close(descriptor)
            if reason == EWOULDBLOCK {
                throw .sessionIdentifierInUse(
                    .init(
                        message:
                            "Another live session (in this process or another) uses the background identifier "
                            + "\"\(identifier)\"; release it first"))
            }
            throw .fileSystem(
                .init(url: directory, message: "Cannot lock \(path): \(String(cString: strerror(reason)))"))
        }
        return SessionLock(descriptor: descriptor)
    }

    /// Lets another session take the identifier. Idempotent.
    func release() {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            close(descriptor)  // closing the only descriptor of the description drops the lock
            descriptor = -1
        }
    }

    deinit {
        release()
    }
}
