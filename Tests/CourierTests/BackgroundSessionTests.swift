import Courier
import Foundation
import Testing

/// Background sessions: tasks owned by the session, journaled, carried on by the next process
/// with the same identifier, one live session per identifier.
@Suite struct BackgroundSessionTests {
    /// A background configuration with storage in a directory of the test's own.
    private static func configuration(_ directory: URL, _ identifier: String) -> HTTPSessionConfiguration {
        var configuration = HTTPSessionConfiguration.background(identifier: identifier)
        configuration.storageDirectory = directory
        return configuration
    }

    private static func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(UUID().uuidString)"
    }

    /// The files in `directory` (none when it does not exist).
    private static func files(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    // MARK: Across processes

    @Test func aDownloadKilledMidwayCompletesInANewProcessFetchingOnlyTheMissingBytes() async throws {
        let fault = try await TestServers.fault()
        let home = try DownloadTests.temporaryDirectory()
        let downloads = home.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        let destination = downloads.appendingPathComponent("big.bin")
        let name = Self.uniqueName("killed")
        let size = 6_000_000
        let url = fault.absoluteString + "file/\(name)?n=\(size)"
        let identifier = Self.uniqueName("kill")
        let environment = ["HOME": home.path, "XDG_CACHE_HOME": home.path]

        // The helper pauses itself after a megabyte (at 2 MB/s the rest would take 2.5 s more),
        // so the kill lands part way however busy this machine is.
        let first = try HelperProcess(
            ["background-download", identifier, url, destination.path, "2000000", "1000000"], environment: environment)
        _ = try await first.line { $0.hasPrefix("paused ") }
        first.kill()
        _ = await first.exitStatus()
        let partials = Self.files(in: downloads).filter { $0.hasSuffix(".download") }
        try #require(partials.count == 1)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        let partial = downloads.appendingPathComponent(partials[0])
        let kept = try #require(try FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int)
        #expect(kept > 0 && kept < size)

        let second = try HelperProcess(["background-restore", identifier], environment: environment)
        let restored = try await second.line { $0.hasPrefix("restored ") }
        #expect(restored.split(separator: ",").count == 1)
        let done = try await second.line { $0.hasPrefix("done ") }
        #expect(done.hasSuffix(" \(destination.path)"))
        _ = try await second.line { $0.hasPrefix("event ") }
        #expect(await second.exitStatus() == 0)

        #expect(try Data(contentsOf: destination) == faultBytes(size))
        let api = try await faultManager()
        let stats: JSON = try await api.GET("stats/\(name)")
        #expect(stats["requests"] == 2)
        #expect(stats["ranges"] == [nil, .string("bytes=\(kept)-")])
        // Nothing left behind: no partial file, no journal entry.
        #expect(Self.files(in: downloads) == ["big.bin"])
        let journal = home.appendingPathComponent("CourierTestHelper/courier/background/\(identifier)/tasks")
        #expect(Self.files(in: journal) == [])
    }

    @Test func anUploadKilledMidwayIsSentAgainByANewProcess() async throws {
        let fault = try await TestServers.fault()
        let home = try DownloadTests.temporaryDirectory()
        let source = home.appendingPathComponent("upload.bin")
        let body = faultBytes(3_000_000, from: 7)
        try body.write(to: source)
        let identifier = Self.uniqueName("upload")
        let environment = ["HOME": home.path, "XDG_CACHE_HOME": home.path]

        let first = try HelperProcess(
            ["background-upload", identifier, fault.absoluteString + "echo", source.path, "1000000", "500000"],
            environment: environment)
        _ = try await first.line { $0.hasPrefix("paused ") }
        first.kill()
        _ = await first.exitStatus()

        let second = try HelperProcess(["background-restore", identifier], environment: environment)
        let uploaded = try await second.line { $0.hasPrefix("uploaded ") }
        let echo = try JSONDecoder().decode(
            JSON.self, from: Data(uploaded.split(separator: " ", maxSplits: 2)[2].utf8))
        #expect(echo["method"] == "PUT")
        #expect(echo["bodyLength"] == .int(body.count))
        #expect(echo["sha256"] == .string(SHA256.hex(body)))
        #expect(await second.exitStatus() == 0)
    }

    @Test func aSecondProcessWithTheSameIdentifierGetsSessionIdentifierInUse() async throws {
        let fault = try await TestServers.fault()
        let home = try DownloadTests.temporaryDirectory()
        let identifier = Self.uniqueName("held")
        let environment = ["HOME": home.path, "XDG_CACHE_HOME": home.path]
        // 50 MB at 100 kB/s: the holder is still downloading while the rival starts, however
        // slowly the rival's process starts (under a sanitizer, with the suite running, tens of
        // seconds); it is killed below.
        let holder = try HelperProcess(
            [
                "background-download", identifier, fault.absoluteString + "file/\(Self.uniqueName("held"))?n=50000000",
                home.appendingPathComponent("held.bin").path, "100000",
            ], environment: environment)
        _ = try await holder.line { $0.hasPrefix("started ") }

        let rival = try HelperProcess(["background-claim", identifier], environment: environment)
        let answer = try await rival.line { _ in true }
        #expect(answer.hasPrefix("in-use "))
        #expect(await rival.exitStatus() == 0)

        // The kernel drops a killed process's lock: the identifier is free again.
        holder.kill()
        _ = await holder.exitStatus()
        let next = try HelperProcess(["background-claim", identifier], environment: environment)
        #expect(try await next.line { _ in true } == "claimed")
        next.kill()
    }

    // MARK: In one process

    @Test func aSecondManagerWithTheSameIdentifierIsRefusedBeforeSendingAnything() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let configuration = Self.configuration(directory, Self.uniqueName("twice"))
        let fault = try await TestServers.fault()
        let first = HTTPSessionManager(baseURL: fault, configuration: configuration)
        #expect(try await first.restoredTasks().isEmpty)

        let second = HTTPSessionManager(baseURL: fault, configuration: configuration)
        let restoreError = await capturedError { _ = try await second.restoredTasks() }
        #expect(isCourierError(restoreError) { if case .sessionIdentifierInUse = $0 { true } else { false } })
        let name = Self.uniqueName("refused")
        let downloadError = await capturedError {
            _ = try await second.downloadTask("file/\(name)", to: directory.appendingPathComponent("x")).value
        }
        #expect(isCourierError(downloadError) { if case .sessionIdentifierInUse = $0 { true } else { false } })
        let stats: JSON = try await faultManager().GET("stats/\(name)")
        #expect(stats["requests"] == 0)

        first.invalidateAndCancel()
        let third = HTTPSessionManager(baseURL: fault, configuration: configuration)
        #expect(try await third.restoredTasks().isEmpty)
    }

    @Test func aSecondManagerThroughALinkToTheSameStorageIsRefused() async throws {
        let home = try DownloadTests.temporaryDirectory()
        // Where the test helper's default storage is, with `XDG_CACHE_HOME` set to `home`.
        let directory = home.appendingPathComponent("CourierTestHelper/courier")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let link = home.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: directory)
        let identifier = Self.uniqueName("linked")
        let fault = try await TestServers.fault()
        let first = HTTPSessionManager(baseURL: fault, configuration: Self.configuration(directory, identifier))
        #expect(try await first.restoredTasks().isEmpty)

        let second = HTTPSessionManager(baseURL: fault, configuration: Self.configuration(link, identifier))
        let error = await capturedError { _ = try await second.restoredTasks() }
        #expect(isCourierError(error) { if case .sessionIdentifierInUse = $0 { true } else { false } })
        // The refusal left the first manager's lock in place for other processes too.
        let rival = try HelperProcess(
            ["background-claim", identifier], environment: ["HOME": home.path, "XDG_CACHE_HOME": home.path])
        #expect(try await rival.line { _ in true }.hasPrefix("in-use "))
        first.invalidateAndCancel()
    }

    /// Every process this one spawns shares its open files from its `fork` to its `exec`; a
    /// child that holds the lock file's open description (here for its whole life: `sleep`,
    /// given a copy of the descriptor) must not keep a released identifier taken.
    @Test func aChildProcessHoldingTheLockFileDoesNotKeepAReleasedIdentifier() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let identifier = Self.uniqueName("spawned")
        let configuration = Self.configuration(directory, identifier)
        let fault = try await TestServers.fault()
        let first = HTTPSessionManager(baseURL: fault, configuration: configuration)
        #expect(try await first.restoredTasks().isEmpty)

        let lockFile = try #require(Self.openDescriptor(endingWith: "/\(identifier)/session.lock"))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, lockFile, 200)
        var child: pid_t = 0
        let words: [String] = ["/bin/sleep", "60"]
        let argv = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        #expect(posix_spawn(&child, "/bin/sleep", &actions, nil, argv, environ) == 0)
        defer {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }

        first.invalidateAndCancel()
        let next = HTTPSessionManager(baseURL: fault, configuration: configuration)
        #expect(try await next.restoredTasks().isEmpty)
        // The child is still there, holding its copy.
        #expect(kill(child, 0) == 0)
    }

    /// The descriptor of this process whose file's path ends with `suffix`.
    private static func openDescriptor(endingWith suffix: String) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap(Int32.init).first { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"))?
                .hasSuffix(suffix) == true
        }
    }

    @Test func dataTasksStreamsAndUploadsFromMemoryAreRefused() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let api = HTTPSessionManager(
            baseURL: try await TestServers.fault(),
            configuration: Self.configuration(directory, Self.uniqueName("data")))
        func isRefusal(_ error: (any Error)?) -> Bool {
            isCourierError(error) { if case .unsupportedInBackgroundSession = $0 { true } else { false } }
        }
        #expect(isRefusal(await capturedError { _ = try await api.GET("bytes", parameters: ["n": 10]) }))
        #expect(isRefusal(await capturedError { for try await _ in api.bytes(.get, "bytes") {} }))
        #expect(
            isRefusal(
                await capturedError {
                    _ = try await api.uploadTask(.put, "echo", body: .data(Data("x".utf8))).value
                }))
    }

    @Test func aDownloadOutlivesTheSwiftTaskThatAwaitsIt() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let api = HTTPSessionManager(
            baseURL: try await TestServers.fault(),
            configuration: Self.configuration(directory, Self.uniqueName("owned")))
        let task = api.downloadTask(
            "file/\(Self.uniqueName("owned"))", parameters: ["n": 400_000], to: directory.appendingPathComponent("o"))
        task.setMaximumBytesPerSecond(400_000)
        let waiter = Task { try await task.value }
        try await Task.sleep(for: .milliseconds(200))
        waiter.cancel()
        // The session owns the download: it goes on, and the cancelled waiter still gets it.
        let file = try await waiter.value
        #expect(try Data(contentsOf: file) == faultBytes(400_000))
    }

    @Test func cancelEndsATaskForGoodWithItsJournalEntryAndPartialFile() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let identifier = Self.uniqueName("cancel")
        // A session-wide limit holds from the first byte (a task's own limit is a command that
        // a loaded machine can deliver after the whole body has arrived), and at this rate the
        // body takes 40 s: the cancel below comes long before the end, however loaded the
        // machine (under ThreadSanitizer with the whole suite, 4 s was not always enough).
        var configuration = Self.configuration(directory, identifier)
        configuration.maximumBytesPerSecond = 50_000
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: configuration)
        let journal = directory.appendingPathComponent("background/\(identifier)/tasks")
        let downloads = directory.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        var events = api.events.makeAsyncIterator()

        let task = api.downloadTask(
            "file/\(Self.uniqueName("cancel"))", parameters: ["n": 2_000_000], to: downloads.appendingPathComponent("c")
        )
        for await progress in task.downloadProgress where progress.completedBytes > 0 { break }
        #expect(Self.files(in: journal) == ["\(task.identifier.uuidString).json"])
        #expect(Self.files(in: downloads).count == 1)  // the partial file

        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        let event = try #require(await events.next())
        #expect(event.taskIdentifier == task.identifier)
        guard case .failed(let error) = event.outcome else {
            Issue.record("expected a failure event, got \(event.outcome)")
            return
        }
        #expect(error is CancellationError)
        // Gone by the time the task reports its end, so a process that exits now leaves nothing.
        #expect(Self.files(in: journal) == [])
        #expect(Self.files(in: downloads) == [])
    }

    @Test func eventsReportDownloadsAndUploads() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let api = HTTPSessionManager(
            baseURL: try await TestServers.fault(),
            configuration: Self.configuration(directory, Self.uniqueName("events")))
        var events = api.events.makeAsyncIterator()
        let source = directory.appendingPathComponent("source.bin")
        try faultBytes(100_000).write(to: source)

        let download = api.downloadTask(
            "file/\(Self.uniqueName("events"))", parameters: ["n": 50_000], to: directory.appendingPathComponent("d"))
        let upload = api.uploadTask(.put, "echo", fromFile: source)
        let file = try await download.value
        let echo = try await upload.value
        #expect(echo["sha256"] == .string(SHA256.hex(faultBytes(100_000))))

        var seen: [UUID: SessionEvent.Outcome] = [:]
        for _ in 0..<2 {
            let event = try #require(await events.next())
            seen[event.taskIdentifier] = event.outcome
        }
        guard case .downloaded(let response)? = seen[download.identifier] else {
            Issue.record("no download event: \(seen)")
            return
        }
        #expect(response.fileURL == file)
        guard case .uploaded(let raw)? = seen[upload.identifier] else {
            Issue.record("no upload event: \(seen)")
            return
        }
        #expect(raw.status == .ok)
        #expect(try JSONDecoder().decode(JSON.self, from: raw.data)["bodyLength"] == 100_000)
    }
}
