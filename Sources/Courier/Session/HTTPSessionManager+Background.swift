@_spi(CourierInternals) import CourierCore
import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// The ends of this session's background tasks (downloads and uploads from files), whether
    /// started in this process or restored by ``restoredTasks()``. Each access gives a new
    /// stream of the events from then on; every stream ends when the session does. A session
    /// that is not a background one has no such tasks: its streams stay empty.
    public nonisolated var events: AsyncStream<SessionEvent> {
        guard let background else {
            return AsyncStream { $0.finish() }
        }
        return background.events.stream()
    }

    /// The tasks that an earlier process left unfinished in this background session, carried
    /// on now: downloads resume with `Range` and `If-Range` from their partial files (or start
    /// over when the server sent no validator), uploads from files start again.
    ///
    /// The first call restores; later calls return the same tasks. Tasks made in this process
    /// are not among them. Throws `sessionIdentifierInUse` when another live session (in this
    /// process or another) holds the identifier. Returns nothing for a default or ephemeral
    /// session.
    public nonisolated func restoredTasks() async throws -> [BackgroundTask] {
        guard let background else { return [] }
        try background.checkIdentifier()
        let task = background.restoration.withLock { restoration in
            if let restoration { return restoration }
            let task = Task { await self.restore(background.journal.load(logger: self.logger)) }
            restoration = task
            return task
        }
        return await task.value
    }

    /// A task for each journal record. The journal is data, not authority: a record whose
    /// paths are not of the form Courier journals (see `journalProblem(_:)`) is dropped and
    /// logged, and the files it names are not touched.
    private nonisolated func restore(_ records: [BackgroundRecord]) async -> [BackgroundTask] {
        var tasks: [BackgroundTask] = []
        for record in records {
            if let problem = Self.journalProblem(record) {
                logger.warning(
                    "Dropped background journal entry \(record.identifier.uuidString): \(problem); the files it names were left as they are"
                )
                await background?.journal.remove(record.identifier)
                continue
            }
            if let task = restore(record) {
                tasks.append(task)
            } else {
                await background?.journal.remove(record.identifier)  // nothing to carry on
            }
        }
        return tasks
    }

    /// A task carrying on `record`; nil when the record cannot be carried on.
    private nonisolated func restore(_ record: BackgroundRecord) -> BackgroundTask? {
        switch record.kind {
        case .download:
            guard
                let destination = record.destination.map({ DownloadDestination.file(URL(fileURLWithPath: $0)) })
                    ?? record.destinationDirectory.map({ DownloadDestination.directory(URL(fileURLWithPath: $0)) })
            else { return nil }
            let options = DownloadOptions(rawValue: record.options ?? 0)
            if let resume = Self.resumeData(for: record) {
                return .download(
                    downloadTask(
                        resumingFrom: resume, destination: destination, options: options, identifier: record.identifier
                    ))
            }
            // No partial bytes, or no validator to prove they belong to the same resource:
            // start over.
            if let partial = record.partialFile { unlink(partial) }
            return .download(
                makeDownloadTask(
                    Call(method: .get, path: record.url, headers: record.headers), destination: destination,
                    options: options, resume: nil, identifier: record.identifier))
        case .upload:
            guard let source = record.sourceFile else { return nil }
            return .upload(
                makeUploadTask(
                    HTTPRequest.Method(record.method) ?? .post, record.url, body: .file(URL(fileURLWithPath: source)),
                    headers: record.headers, compressed: record.compressed ?? false,
                    serializer: DataResponseSerializer(), identifier: record.identifier))
        }
    }

    /// Why a journal record cannot be acted on; nil when its paths are of the form Courier
    /// writes: absolute, without `.` or `..` components; a download's partial file of
    /// Courier's form in the destination's directory (as `ResumeData` is checked).
    nonisolated static func journalProblem(_ record: BackgroundRecord) -> String? {
        func pathProblem(_ path: String, _ what: String) -> String? {
            let url = URL(fileURLWithPath: path)
            guard path.hasPrefix("/"), !url.pathComponents.contains(where: { $0 == ".." || $0 == "." }),
                url.lastPathComponent != "/", !url.lastPathComponent.isEmpty
            else { return "its \(what) \(path) is not an absolute path without `.` or `..`" }
            return nil
        }
        switch record.kind {
        case .download:
            let destination: DownloadDestination
            if let path = record.destination {
                if let problem = pathProblem(path, "destination") { return problem }
                destination = .file(URL(fileURLWithPath: path))
            } else if let path = record.destinationDirectory {
                if let problem = pathProblem(path, "destination directory") { return problem }
                destination = .directory(URL(fileURLWithPath: path))
            } else {
                return "it has no destination"
            }
            if let partial = record.partialFile,
                let problem = ResumeData.partialFileProblem(
                    URL(fileURLWithPath: partial), directory: destination.directory,
                    names: ResumeData.partialFileNames(for: destination))
            {
                return problem
            }
        case .upload:
            guard let source = record.sourceFile else { return "it has no source file" }
            if let problem = pathProblem(source, "source file") { return problem }
        }
        return nil
    }

    /// How to resume a journaled download: the partial file's bytes on disk (what the killed
    /// process wrote) and the validator. Nil when either is missing.
    private nonisolated static func resumeData(for record: BackgroundRecord) -> ResumeData? {
        guard let partialPath = record.partialFile, let validator = record.validator,
            let url = URL(string: record.url),
            let attributes = try? FileManager.default.attributesOfItem(atPath: partialPath),
            attributes[.type] as? FileAttributeType == .typeRegular, let size = attributes[.size] as? Int64, size > 0
        else { return nil }
        return ResumeData(
            url: url, partialFile: URL(fileURLWithPath: partialPath), bytesWritten: size, validator: validator,
            headers: record.headers)
    }

    /// The absolute URL a call would be sent to (before `adapt(_:)`), for the journal.
    nonisolated func urlString(of call: Call) throws(CourierError) -> String {
        try RequestBuilding.urlString(of: prepare(call).head)
    }
}
