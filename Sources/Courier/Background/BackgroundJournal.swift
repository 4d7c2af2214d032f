@_spi(CourierInternals) import CourierCore
import CourierPipeline
import Foundation
import Logging

/// What a background task needs to be carried on by another process: the request, where its
/// bytes go, and (for a download) the partial file and the validator that lets it resume.
struct BackgroundRecord: Codable, Sendable, Equatable {
    enum Kind: String, Codable, Sendable {
        case download
        case upload
    }

    var identifier: UUID
    var kind: Kind
    /// The request method (`GET` for downloads).
    var method: String
    /// The absolute request URL, query included.
    var url: String
    /// The caller's headers (sent again on restore; the manager adds its own as usual).
    var headers: [String: String]
    /// Downloads: the destination file (or the directory, for a name from the response), its
    /// options, the partial file next to it, and the response's `ETag` or `Last-Modified` once
    /// the head has arrived.
    var destination: String?
    var destinationDirectory: String?
    var options: Int?
    var partialFile: String?
    var validator: String?
    /// Uploads: the file sent, and whether it goes gzip-compressed.
    var sourceFile: String?
    var compressed: Bool?

    init(identifier: UUID, kind: Kind, method: String, url: String, headers: [String: String]) {
        self.identifier = identifier
        self.kind = kind
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// The record of a download to `destination` (a file, or a directory for a name from the
    /// response) through `partialFile`, continuing a partial file with `validator` if it had one.
    static func download(
        _ identifier: UUID, url: String, headers: [String: String], destination: HTTPSessionManager.DownloadDestination,
        options: DownloadOptions, partialFile: URL, validator: String?
    ) -> BackgroundRecord {
        var record = BackgroundRecord(
            identifier: identifier, kind: .download, method: "GET", url: url, headers: headers)
        switch destination {
        case .file(let url): record.destination = url.standardizedFileURL.path
        case .directory(let url): record.destinationDirectory = url.standardizedFileURL.path
        }
        record.options = options.rawValue
        record.partialFile = partialFile.path
        record.validator = validator
        return record
    }
}

/// A background session's task journal: one JSON file per unfinished task in `tasks/` under
/// the session's directory.
///
/// Each write is crash-safe: the record goes to a temporary file, which is `fsync`ed, renamed
/// over the task's file, and the directory `fsync`ed, so a reader after a crash (or `SIGKILL`)
/// sees the previous record or the new one, never a torn one. Writes run in order on one
/// serial queue, off the engine thread and off Swift's cooperative pool; `save` and `remove`
/// wait for theirs, `update` (from the engine thread, when a response head arrives) does not.
final class BackgroundJournal: Sendable {
    let directory: URL
    private let queue = DispatchQueue(label: "courier.background-journal")
    /// The records written so far, so that `update` can change one field. Guarded by its lock.
    private let records = Locked([UUID: BackgroundRecord]())

    init(directory: URL) {
        self.directory = directory
    }

    /// Writes `record` and waits until it is on disk.
    func save(_ record: BackgroundRecord) async throws(CourierError) {
        records.withLock { $0[record.identifier] = record }
        let result: Result<Void, CourierError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(CourierError) in try self.write(record) })
            }
        }
        try result.get()
    }

    /// Changes a record already saved and writes it, without waiting (best effort: if the
    /// process dies first, the older record is still valid).
    func update(_ identifier: UUID, _ change: @escaping @Sendable (inout BackgroundRecord) -> Void) {
        queue.async {
            let record = self.records.withLock { records -> BackgroundRecord? in
                guard var record = records[identifier] else { return nil }
                change(&record)
                records[identifier] = record
                return record
            }
            if let record { try? self.write(record) }
        }
    }

    /// Forgets a task: its file goes (in order after any pending write of it), durably, before
    /// this returns. A finished task is reported only after that: a process that ends right
    /// after a completion must not leave the task for the next one to run again.
    func remove(_ identifier: UUID) async {
        records.withLock { $0[identifier] = nil }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                unlink(self.file(for: identifier).path)
                AtomicFile.syncDirectory(self.directory)
                continuation.resume()
            }
        }
    }

    /// The records on disk, oldest first. A file that cannot be decoded is removed (and
    /// `logger` told): its task cannot be carried on, and leaving it would fail every later
    /// restore the same way.
    func load(logger: Logger? = nil) -> [BackgroundRecord] {
        queue.sync {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            var loaded: [(BackgroundRecord, Date)] = []
            for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
                let url = directory.appendingPathComponent(name)
                // A record is a few kilobytes: anything else (a link, a FIFO, a huge file) is not one.
                let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
                guard attributes?[.type] as? FileAttributeType == .typeRegular,
                    (attributes?[.size] as? Int ?? .max) <= 1 << 20,
                    let data = try? Data(contentsOf: url),
                    let record = try? JSONDecoder().decode(BackgroundRecord.self, from: data),
                    name == "\(record.identifier.uuidString).json"
                else {
                    logger?.warning("Dropped background journal file \(url.path): it is not a task record")
                    unlink(url.path)
                    continue
                }
                let created =
                    (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date)
                    ?? .distantPast
                loaded.append((record, created))
            }
            let sorted = loaded.sorted { $0.1 < $1.1 }.map(\.0)
            records.withLock { records in
                for record in sorted { records[record.identifier] = record }
            }
            return sorted
        }
    }

    // MARK: Files (journal queue)

    private func file(for identifier: UUID) -> URL {
        directory.appendingPathComponent("\(identifier.uuidString).json")
    }

    /// Write, fsync, rename, fsync the directory.
    private func write(_ record: BackgroundRecord) throws(CourierError) {
        let target = file(for: record.identifier)
        let data: Data
        do {
            data = try JSONEncoder().encode(record)
        } catch {
            throw .fileSystem(.init(url: directory, message: "Cannot journal a background task: \(error)"))
        }
        do {
            try AtomicFile.replace(target, with: data, durable: true, createsDirectory: true)
        } catch {
            throw .fileSystem(.init(url: target, message: "Cannot journal a background task (\(error.message))"))
        }
    }
}
