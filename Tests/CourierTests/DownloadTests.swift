import Courier
import Foundation
import Testing

/// Downloads against the fault server's named resources, which count the bytes they send and
/// the `Range` headers they receive.
@Suite struct DownloadTests {
    static func uniqueName(_ prefix: String) -> String { "\(prefix)-\(UInt32.random(in: 0...UInt32.max))" }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("courier-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func stats(_ api: HTTPSessionManager, _ name: String) async throws -> JSON {
        try await api.GET("stats/\(name)")
    }

    /// The files in `directory`, hidden ones included.
    static func contents(_ directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    @Test func aDownloadIsByteIdenticalAndLeavesNoTemporaryFile() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory()
        let destination = directory.appendingPathComponent("big.bin")
        let task = api.downloadTask("bytes", parameters: ["n": 3_000_000], to: destination)
        let response = try await task.response
        #expect(response.fileURL == destination)
        #expect(response.status == .ok)
        #expect(try Data(contentsOf: destination) == faultBytes(3_000_000))
        #expect(try Self.contents(directory) == ["big.bin"])
    }

    @Test func progressIsMonotonicAndEndsAtTheTotal() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory()
        let task = api.downloadTask(
            "drip", parameters: ["n": 200, "delay": 5], to: directory.appendingPathComponent("d"))
        var values: [TransferProgress] = []
        for await progress in task.downloadProgress { values.append(progress) }
        _ = try await task.value
        #expect(values.count >= 2)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
        #expect(values.last == TransferProgress(completedBytes: 200, totalBytes: 200))
        #expect(values.last?.fractionCompleted == 1)
    }

    @Test func anExistingFileIsKeptUnlessReplacing() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory()
        let destination = directory.appendingPathComponent("x.bin")
        try Data("old".utf8).write(to: destination)
        let error = await capturedError {
            _ = try await api.downloadTask("bytes", parameters: ["n": 10], to: destination).value
        }
        #expect(isCourierError(error!) { if case .fileSystem = $0 { true } else { false } })
        #expect(try Data(contentsOf: destination) == Data("old".utf8))
        _ = try await api.downloadTask("bytes", parameters: ["n": 10], to: destination, options: .replaceExisting).value
        #expect(try Data(contentsOf: destination) == faultBytes(10))
    }

    @Test func missingDirectoriesAreCreatedOnlyWhenAsked() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory().appendingPathComponent("a/b")
        let destination = directory.appendingPathComponent("f")
        let error = await capturedError { _ = try await api.downloadTask("bytes", to: destination).value }
        #expect(isCourierError(error!) { if case .fileSystem = $0 { true } else { false } })
        _ = try await api.downloadTask("bytes", to: destination, options: .createIntermediateDirectories).value
        #expect(FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func anErrorStatusWritesNothingAndCarriesTheBody() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory()
        let error = await capturedError {
            _ = try await api.downloadTask("status/404", to: directory.appendingPathComponent("nope")).value
        }
        guard case CourierError.unacceptableStatusCode(let context)? = error else {
            Issue.record("expected unacceptableStatusCode, got \(String(describing: error))")
            return
        }
        #expect(context.body == Data("status 404".utf8))
        #expect(try Self.contents(directory).isEmpty)
    }

    @Test func theDestinationCanComeFromContentDisposition() async throws {
        let api = try await httpbinManager()
        let directory = try Self.temporaryDirectory()
        let header = "attachment; filename=\"../../etc/evil name.txt\""
        let task = api.downloadTask(
            "response-headers", parameters: ["Content-Disposition": .string(header)], into: directory)
        let file = try await task.value
        #expect(file == directory.appendingPathComponent("evil name.txt"))
        #expect(try Self.contents(directory) == ["evil name.txt"])
    }

    @Test func cancelProducingResumeDataThenResumeFetchesOnlyTheRest() async throws {
        let api = try await faultManager()
        let name = Self.uniqueName("resume")
        let directory = try Self.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let total = 4_000_000
        // Slow the transfer down so that it is still running when cancelled: 16 s for the whole
        // file, so that a test task starved for seconds (ThreadSanitizer, the whole suite in
        // parallel) still cancels it part way.
        let download = api.downloadTask("file/\(name)", parameters: ["n": .int(total)], to: destination)
        download.setMaximumBytesPerSecond(250_000)
        for await progress in download.downloadProgress where progress.completedBytes > 200_000 { break }
        let resumeData = try #require(await download.cancel(producingResumeData: true))
        await #expect(throws: CancellationError.self) { _ = try await download.value }
        #expect(resumeData.bytesWritten > 0 && resumeData.bytesWritten < Int64(total))
        #expect(resumeData.validator == "\"\(name)-\(total)\"")
        #expect(FileManager.default.fileExists(atPath: resumeData.partialFile.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path))

        // Count only what the resumed request makes the server send.
        _ = try await api.DELETE("stats/\(name)", serializer: DataResponseSerializer())
        let restored = try ResumeData(data: resumeData.data)
        let resumed = try await api.downloadTask(resumingFrom: restored, to: destination).response
        #expect(resumed.status == .partialContent)
        #expect(try Data(contentsOf: destination) == faultBytes(total))
        #expect(!FileManager.default.fileExists(atPath: resumeData.partialFile.path))
        let stats = try await Self.stats(api, name)
        #expect(stats["ranges"] == [.string("bytes=\(resumeData.bytesWritten)-")])
        #expect(stats["bytesSent"].intValue == total - Int(resumeData.bytesWritten))
    }

    @Test func aDroppedConnectionSurfacesResumeDataThatCompletesTheFile() async throws {
        let api = try await faultManager()
        let name = Self.uniqueName("drop")
        let directory = try Self.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let total = 1_000_000
        let error = await capturedError {
            _ = try await api.downloadTask(
                "file/\(name)", parameters: ["n": .int(total), "drop-after": 300_000], to: destination
            ).value
        }
        guard case CourierError.connectionLost(let context)? = error, let resumeData = context.resumeData else {
            Issue.record("expected connectionLost with resume data, got \(String(describing: error))")
            return
        }
        #expect(resumeData.bytesWritten == 300_000)
        _ = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        #expect(try Data(contentsOf: destination) == faultBytes(total))
        let stats = try await Self.stats(api, name)
        #expect(stats["requests"] == 2)
        #expect(stats["ranges"] == [nil, "bytes=300000-"])
        #expect(stats["bytesSent"].intValue == total)
    }

    @Test func aChangedResourceAnswered200StartsOver() async throws {
        let api = try await faultManager()
        let name = Self.uniqueName("changed")
        let directory = try Self.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let error = await capturedError {
            _ = try await api.downloadTask(
                "file/\(name)", parameters: ["n": 500_000, "drop-after": 100_000, "etag": "v1"], to: destination
            ).value
        }
        let resumeData = try #require((error as? CourierError)?.context.resumeData)
        #expect(resumeData.validator == "\"v1\"")
        // The server's copy changed: a different ETag, so If-Range fails and it sends all of it.
        var changed = resumeData
        changed.url = URL(string: resumeData.url.absoluteString.replacingOccurrences(of: "etag=v1", with: "etag=v2"))!
        let response = try await api.downloadTask(resumingFrom: changed, to: destination).response
        #expect(response.status == .ok)
        #expect(try Data(contentsOf: destination) == faultBytes(500_000))
    }

    @Test func resumingACompleteFileNeedsNoBody() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory()
        let partial = ResumeData.newPartialFile(for: directory.appendingPathComponent("done"))
        try faultBytes(1000).write(to: partial)
        let resumeData = ResumeData(
            url: try await TestServers.fault().appendingPathComponent("bytes").appending(queryItems: [
                .init(name: "n", value: "1000")
            ]), partialFile: partial, bytesWritten: 1000, validator: "\"fixed-1000\"")
        let file = try await api.downloadTask(resumingFrom: resumeData, to: directory.appendingPathComponent("done"))
            .value
        #expect(try Data(contentsOf: file) == faultBytes(1000))
    }

    @Test func cancellingWithoutResumeDataDeletesThePartialFile() async throws {
        let api = try await faultManager()
        let directory = try Self.temporaryDirectory()
        let download = api.downloadTask(
            "drip", parameters: ["n": 100, "delay": 50], to: directory.appendingPathComponent("x"))
        try await Task.sleep(for: .milliseconds(400))
        #expect(await download.cancel(producingResumeData: false) == nil)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try Self.contents(directory).isEmpty)
    }
}

extension DownloadTests {
    /// A resumed download used to report from zero, with the remaining bytes as the total: a
    /// progress bar jumped back.
    @Test func aResumedDownloadReportsTheBytesOnDiskAndTheFullSize() async throws {
        let api = try await faultManager()
        let name = "resume-progress-\(UUID().uuidString)"
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        // 32 s at 250 kB/s: still running when the test cancels it, however slow the machine.
        let total = 8_000_000
        let first = api.downloadTask("file/\(name)", parameters: ["n": .int(total)], to: destination)
        first.setMaximumBytesPerSecond(250_000)
        for await progress in first.downloadProgress where progress.completedBytes > 100_000 { break }
        let resumeData = try #require(await first.cancel(producingResumeData: true))
        #expect(resumeData.bytesWritten > 0 && resumeData.bytesWritten < Int64(total))

        let resumed = api.downloadTask(resumingFrom: resumeData, to: destination)
        var seen: [TransferProgress] = []
        for await progress in resumed.downloadProgress { seen.append(progress) }
        _ = try await resumed.value
        #expect(try Data(contentsOf: destination) == faultBytes(total))
        // Past the stream's starting value (zero of unknown), progress starts at the bytes on
        // disk and counts to the whole file.
        let reported = seen.filter { $0.totalBytes != nil }
        #expect(reported.first?.completedBytes == resumeData.bytesWritten)
        #expect(reported.allSatisfy { $0.totalBytes == Int64(total) })
        #expect(reported.last?.completedBytes == Int64(total))
    }
}

extension DownloadTests {
    // MARK: Suggested file names

    /// `invoice\u{202E}fdp.exe` displays as `invoiceexe.pdf`: format characters (bidirectional
    /// overrides, zero-width ones) are stripped from a suggested name, as control characters are.
    @Test func aSuggestedNameLosesBidirectionalOverridesAndFormatCharacters() async throws {
        let api = try await httpbinManager()
        let directory = try DownloadTests.temporaryDirectory()
        let header = "attachment; filename*=UTF-8''invoice%E2%80%AEfdp%E2%80%8B.exe"
        let task = api.downloadTask(
            "response-headers", parameters: ["Content-Disposition": .string(header)], into: directory)
        let file = try await task.value
        #expect(file.lastPathComponent == "invoicefdp.exe")
        #expect(try DownloadTests.contents(directory) == ["invoicefdp.exe"])
    }

    /// A `/` with a combining mark after it is still a directory separator, and dots after
    /// leading spaces are still leading dots.
    @Test(arguments: [
        ("a%2F%CC%81..%2F%CC%81escape.txt", "\u{301}escape.txt"),
        ("%20..", nil),
        ("%20.hidden", "hidden"),
    ])
    func aSuggestedNameStaysOneVisibleComponent(encoded: String, expected: String?) async throws {
        let api = try await httpbinManager()
        let directory = try DownloadTests.temporaryDirectory()
        let header = "attachment; filename*=UTF-8''\(encoded)"
        let task = api.downloadTask(
            "response-headers", parameters: ["Content-Disposition": .string(header)], into: directory)
        let file = try await task.value
        #expect(file.deletingLastPathComponent().standardizedFileURL.path == directory.standardizedFileURL.path)
        if let expected {
            #expect(file.lastPathComponent == expected)
        } else {
            #expect(file.lastPathComponent == "response-headers")
        }
    }
}
