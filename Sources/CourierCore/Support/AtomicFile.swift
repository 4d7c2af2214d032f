import Foundation

/// Whole-file replacement: the bytes go to a temporary file beside the target, which is then
/// renamed over it, so a reader sees the old file or the new one, never a part. Files are
/// private to the user (mode 0600): they hold cookies, cached responses and task records.
package enum AtomicFile {
    /// A step that failed, with the `errno` it left.
    package struct Failure: Error {
        package var operation: String
        package var path: String
        package var code: Int32

        package var message: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
    }

    /// Writes `data` in place of the file at `url`; on failure nothing has changed.
    ///
    /// - `durable`: `fsync` the file before the rename and the directory after, so that the
    ///   new file survives a power loss (the background journal). Without it, a crash of the
    ///   machine can lose the write or leave the file short, which suits files whose loss
    ///   costs a miss (cache entries, the cookie jar); Foundation's `Data.write` would sync
    ///   every one of them, a disk flush each.
    /// - `createsDirectory`: make the directory (and its parents) if the first attempt finds
    ///   it missing.
    package static func replace(
        _ url: URL, with data: Data, durable: Bool = false, createsDirectory: Bool = false
    ) throws(Failure) {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(
            ".\(url.lastPathComponent).\(UInt32.random(in: 0...UInt32.max))")
        var descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0, errno == ENOENT, createsDirectory,
            (try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)) != nil
        {
            descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        }
        guard descriptor >= 0 else { throw Failure(operation: "open", path: temporary.path, code: errno) }
        let failure = data.withUnsafeBytes { bytes -> Failure? in
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return Failure(operation: "write", path: temporary.path, code: errno) }
                offset += count
            }
            if durable, fsync(descriptor) != 0 { return Failure(operation: "fsync", path: temporary.path, code: errno) }
            return nil
        }
        close(descriptor)
        if let failure {
            unlink(temporary.path)
            throw failure
        }
        guard rename(temporary.path, url.path) == 0 else {
            let failure = Failure(operation: "rename", path: url.path, code: errno)
            unlink(temporary.path)
            throw failure
        }
        if durable { syncDirectory(directory) }
    }

    /// Makes a rename or unlink in `directory` durable.
    package static func syncDirectory(_ directory: URL) {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}
