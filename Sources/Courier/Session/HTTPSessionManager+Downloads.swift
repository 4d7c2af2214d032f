import CCourierSystem
import CourierCore
import CourierJSON
import CourierPipeline
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Starts a download to `destination`. The body goes straight to a temporary file next to
    /// it, renamed into place when the transfer succeeded and the status is in 200..<300.
    ///
    /// - Parameters:
    ///   - path: A path relative to ``baseURL``, or an absolute URL.
    ///   - parameters: Encoded into the query (by ``requestSerializer``; GET).
    ///   - headers: Headers for this request.
    ///   - requestOptions: Timeouts, redirects, retry and the rest, for this request.
    ///   - destination: The file to create.
    ///   - options: Whether to create missing directories and replace an existing file.
    public nonisolated func downloadTask(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        requestOptions: RequestOptions = RequestOptions(), to destination: URL, options: DownloadOptions = []
    ) -> DownloadTask {
        downloadTask(
            .get, path, parameters: parameters, headers: headers, requestOptions: requestOptions, to: destination,
            options: options)
    }

    /// Starts a download of the response to any request: an export behind a `POST`, for
    /// example. `parameters` are encoded by ``requestSerializer`` (into the body for `POST`,
    /// `PUT` and `PATCH`); `body`, when given, is sent as is instead. Resume data from such a
    /// download resumes with `GET`: resume only from resources a `GET` reaches.
    public nonisolated func downloadTask(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, body: UploadBody? = nil,
        headers: [String: String] = [:], requestOptions: RequestOptions = RequestOptions(), to destination: URL,
        options: DownloadOptions = []
    ) -> DownloadTask {
        do {
            var call = Call(
                method: method, path: path, parameters: parameters, headers: headers, options: requestOptions)
            try call.setBody(body)
            return makeDownloadTask(call, destination: .file(destination), options: options, resume: nil)
        } catch {
            return makeDownloadTask(
                Call(method: method, path: path, headers: headers), destination: .file(destination), options: options,
                resume: nil, refusal: error)
        }
    }

    /// Starts a download into `directory`, named after the response: the `Content-Disposition`
    /// file name (reduced to a safe single path component), else the URL's last component.
    public nonisolated func downloadTask(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        requestOptions: RequestOptions = RequestOptions(), into directory: URL, options: DownloadOptions = []
    ) -> DownloadTask {
        makeDownloadTask(
            Call(method: .get, path: path, parameters: parameters, headers: headers, options: requestOptions),
            destination: .directory(directory), options: options, resume: nil)
    }

    /// Continues an interrupted download: asks for the missing bytes with `Range` and, when
    /// there is a validator, `If-Range`. A server that answers 200 (the resource changed, or
    /// ranges are not supported) sends the whole body, which replaces the partial file.
    ///
    /// Resume data is checked before anything is sent, since it may have been kept on disk and
    /// changed there: its `partialFile` must be a partial file of the form Courier makes
    /// (`ResumeData.newPartialFile(for:)`) in `destination`'s directory, reached without `..`
    /// or a symbolic link, a regular file with no other link; and `bytesWritten` must not be
    /// negative. Otherwise the task fails with `fileSystem` ("Cannot resume the download: ...")
    /// and the file named is not touched. The download resumes at `bytesWritten` or at the
    /// partial file's size, whichever is smaller.
    public nonisolated func downloadTask(
        resumingFrom resumeData: ResumeData, requestOptions: RequestOptions = RequestOptions(), to destination: URL,
        options: DownloadOptions = []
    ) -> DownloadTask {
        downloadTask(
            resumingFrom: resumeData, destination: .file(destination), options: options, requestOptions: requestOptions)
    }

    nonisolated func downloadTask(
        resumingFrom resumeData: ResumeData, destination: DownloadDestination, options: DownloadOptions,
        requestOptions: RequestOptions = RequestOptions(), identifier: UUID = UUID()
    ) -> DownloadTask {
        var headers = resumeData.headers
        let partial: ResumeData.OpenedPartialFile
        do {
            partial = try resumeData.openPartialFile(for: destination)
        } catch {
            logger.warning("\(error.context.message)")
            return makeDownloadTask(
                Call(method: .get, path: resumeData.url.absoluteString, headers: headers), destination: destination,
                options: options, resume: nil, refusal: error, identifier: identifier)
        }
        headers["Range"] = "bytes=\(partial.offset)-"
        if let validator = resumeData.validator { headers["If-Range"] = validator }
        return makeDownloadTask(
            Call(method: .get, path: resumeData.url.absoluteString, headers: headers, options: requestOptions),
            destination: destination,
            options: options, resume: (resumeData, partial), identifier: identifier)
    }

    enum DownloadDestination {
        case file(URL)
        case directory(URL)

        /// The directory the file goes to, standardized (no `.` or `..`).
        var directory: URL {
            switch self {
            case .file(let url): url.deletingLastPathComponent().standardizedFileURL
            case .directory(let url): url.standardizedFileURL
            }
        }
    }

    /// A download task; `resume` finishes an opened partial file, `refusal` (resume data that
    /// did not pass) fails the task before anything is sent or written.
    nonisolated func makeDownloadTask(
        _ plainCall: Call, destination: DownloadDestination, options: DownloadOptions,
        resume resuming: (data: ResumeData, partial: ResumeData.OpenedPartialFile)?, refusal: CourierError? = nil,
        identifier: UUID = UUID()
    ) -> DownloadTask {
        let resume = resuming?.data
        var call = plainCall
        call.usesLargeBuffers = true
        let finalCall = call
        let name: String
        switch destination {
        case .file(let url): name = url.lastPathComponent
        case .directory: name = "download"
        }
        let temporary =
            resuming?.partial.file ?? ResumeData.partialFile(named: name, in: destination.directory)
        let background = self.background
        var validatorArrived: (@Sendable (String?) -> Void)?
        if let journal = background?.journal {
            validatorArrived = { validator in journal.update(identifier) { $0.validator = validator } }
        }
        let sink = DownloadSink(
            file: temporary, resuming: resuming?.partial, validator: resume?.validator,
            keepsPartialWhenInterrupted: background != nil,
            validatorArrived: validatorArrived)
        sink.sourceURL = resume?.url.absoluteString
        let originalHeaders = resume?.headers ?? call.headers
        let resumeBase: @Sendable (DownloadSink.Result) -> ResumeData? = { result in
            guard case .partial(let file, let bytes, let validator, let total) = result,
                let sourceURL = sink.sourceURL.flatMap(URL.init(string:))
            else { return nil }
            return ResumeData(
                url: sourceURL, partialFile: file, bytesWritten: bytes, validator: validator ?? resume?.validator,
                headers: originalHeaders, totalBytes: total ?? resume?.totalBytes)
        }
        let control = TaskControl()
        if let resuming {
            // A resumed task starts where its file is, not at zero of an unknown total.
            control.reporters.download.update(completedBytes: resuming.partial.offset, totalBytes: resume?.totalBytes)
        }
        return DownloadTask(
            identifier: identifier, control: control, sink: sink, ownedBySession: background != nil,
            tracking: tracking(.download, finalCall.method, finalCall.path), resumeBase: resumeBase
        ) { control in
            do {
                if let refusal { throw refusal }
                try Self.prepareDestination(destination, options: options)
                if let background {
                    guard finalCall.method == .get, finalCall.body == nil else {
                        throw CourierError.unsupportedInBackgroundSession(
                            .init(message: "A background session downloads with GET only, without a body"))
                    }
                    let url = try resume.map { $0.url.absoluteString } ?? self.urlString(of: finalCall)
                    let record = BackgroundRecord.download(
                        identifier, url: url, headers: originalHeaders, destination: destination, options: options,
                        partialFile: temporary, validator: resume?.validator)
                    try await background.begin(record) { control.cancel() }
                }
                let raw = try await self.performRaw(
                    finalCall, reporters: control.reporters, sink: sink,
                    register: { transfer in
                        if sink.sourceURL == nil { sink.sourceURL = transfer.requestURL }
                        control.attach(transfer)
                    },
                    serialize: { raw in
                        // 416: the partial file may hold the whole body already (see `finishDownload`).
                        if raw.status.code != 416 { try Self.requireSuccess(raw) }
                    })
                let response = try await Self.finishDownload(
                    raw, sink: sink, destination: destination, options: options)
                await background?.taskEnded(identifier, control: control, .downloaded(response))
                return response
            } catch {
                // What the sink left: for resume data, and (background) to know it is done with
                // the partial file. A plain cancellation does not wait for it.
                let ended = error is CourierError || background != nil ? await sink.result() : nil
                var failure = error
                if let error = error as? CourierError, let resumeData = ended.flatMap(resumeBase) {
                    failure = error.withContext { $0.resumeData = resumeData }
                }
                if let background {
                    let discardsPartial = control.isCancelled && !sink.callerWantsPartial
                    await background.taskEnded(
                        identifier, control: control, .failed(failure), discarding: discardsPartial ? temporary : nil)
                }
                throw failure
            }
        }
    }

    /// Before anything is sent: the directory exists (or is made), and the destination is free
    /// unless it may be replaced.
    private nonisolated static func prepareDestination(
        _ destination: DownloadDestination, options: DownloadOptions
    ) throws(CourierError) {
        let directory = destination.directory
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard options.contains(.createIntermediateDirectories) else {
                throw .fileSystem(.init(url: directory, message: "The directory \(directory.path) does not exist"))
            }
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw .fileSystem(.init(url: directory, message: "Cannot create \(directory.path): \(error)"))
            }
        } else if !isDirectory.boolValue {
            throw .fileSystem(.init(url: directory, message: "\(directory.path) is not a directory"))
        }
        if case .file(let url) = destination, !options.contains(.replaceExisting),
            FileManager.default.fileExists(atPath: url.path)
        {
            throw .fileSystem(
                .init(url: url, message: "\(url.path) exists; pass .replaceExisting to replace it"))
        }
    }

    /// After the transfer: a complete file with an acceptable status is renamed into place.
    private nonisolated static func finishDownload(
        _ raw: RawResponse, sink: DownloadSink, destination: DownloadDestination, options: DownloadOptions
    ) async throws -> DownloadResponse {
        let result = await sink.result()
        guard case .complete(let file, _, let suggestedName) = result else {
            throw CourierError.unacceptableStatusCode(raw.errorContext("Unacceptable status code \(raw.status.code)"))
        }
        let target: URL
        switch destination {
        case .file(let url):
            target = url
        case .directory(let directory):
            let name = suggestedName ?? ContentDisposition.sanitized(raw.url.lastPathComponent) ?? "download"
            target = directory.appendingPathComponent(name)
        }
        let moved =
            options.contains(.replaceExisting)
            ? rename(file.path, target.path) : courier_rename_noreplace(file.path, target.path)
        guard moved == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(file.path)
            throw CourierError.fileSystem(
                .init(
                    url: target, response: raw.response,
                    message: "Cannot move the download to \(target.path): \(reason)"))
        }
        return DownloadResponse(request: raw.request, head: raw.head, fileURL: target, metrics: raw.metrics)
    }
}
