import Foundation

/// Whole-file replacement: the bytes go to a temporary file beside the target, which is then
/// renamed over it, so a reader sees the old file or the new one, never a part.
enum AtomicFile {
    /// Writes `data` in place of the file at `url`; false (and nothing changed) on failure.
    /// No `fsync`: for files whose loss in a crash costs nothing but a miss, such as cache
    /// entries (Foundation's `Data.write` syncs every file, which costs a disk flush each).
    static func replace(_ url: URL, with data: Data) -> Bool {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).\(UInt32.random(in: 0...UInt32.max))")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return false }
        let written = data.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        close(descriptor)
        guard written, rename(temporary.path, url.path) == 0 else {
            unlink(temporary.path)
            return false
        }
        return true
    }
}
