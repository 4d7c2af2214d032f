import Foundation
import Testing

/// A `CourierTestHelper` child process (Tests/Support/CourierTestHelper): its stdout as lines,
/// SIGKILL, and its exit status. Nothing here blocks a thread of Swift's cooperative pool:
/// stdout is read on a thread of its own, and waits poll with `Task.sleep`.
final class HelperProcess: Sendable {
    /// The helper binary, built next to the test bundle (`swift build --build-tests`).
    static var executable: URL {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let running = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")).map {
            URL(fileURLWithPath: $0)
        }
        return (running ?? bundle).deletingLastPathComponent().appendingPathComponent("CourierTestHelper")
    }

    /// The child, asked only for its pid, whether it runs and its status (under its lock).
    private struct Handle: @unchecked Sendable {
        let process: ChildProcess
    }

    private let handle: Handle
    private let lines = LineQueue()
    let pid: Int32

    /// Starts the helper with `arguments`; `environment` entries replace the test's own. With
    /// a `launcher` (a program and its arguments), that program is run with the helper's path
    /// and `arguments` after its own (`unshare -m ...`, say).
    init(_ arguments: [String], environment: [String: String] = [:], launcher: [String] = []) throws {
        let process = ChildProcess()
        if let program = launcher.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = Array(launcher.dropFirst()) + [Self.executable.path] + arguments
        } else {
            process.executableURL = Self.executable
            process.arguments = arguments
        }
        var inherited = ProcessInfo.processInfo.environment
        // Under AddressSanitizer (scripts/sanitize): a helper is killed or exits from inside its
        // async main, with live objects in abandoned frames, which LeakSanitizer would report as
        // leaks. Leaks are looked for in the test process, where everything ends normally.
        if let options = inherited["ASAN_OPTIONS"] { inherited["ASAN_OPTIONS"] = options + ":detect_leaks=0" }
        process.environment = inherited.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        handle = Handle(process: process)
        pid = process.processIdentifier
        let reading = output.fileHandleForReading
        let lines = self.lines
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = reading.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    lines.push(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
            lines.finish()
        }
    }

    /// The next line, or nil once the helper closed its stdout.
    func nextLine() async -> String? {
        await lines.next()
    }

    /// Reads lines until one satisfies `predicate` (returned); fails the test at the end of
    /// the output or after `timeout`.
    func line(
        timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: @escaping @Sendable (String) -> Bool
    ) async throws -> String {
        let found = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                while let line = await self.nextLine() {
                    if predicate(line) { return line }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            if first == nil { kill() }  // the reader then sees the end of the output and returns
            group.cancelAll()
            return first
        }
        guard let found else {
            kill()
            throw TestServerError("The helper (pid \(pid)) ended or timed out before the expected line")
        }
        return found
    }

    /// Ends the helper at once, as a crash would.
    func kill() {
        _ = Foundation.kill(pid, SIGKILL)
    }

    /// Waits for the helper to exit; its exit status (or the signal for one killed).
    func exitStatus(timeout: Duration = .seconds(60)) async -> Int32 {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while handle.process.isRunning, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if handle.process.isRunning {
            kill()
            return -1
        }
        return handle.process.terminationStatus
    }
}

/// Lines from a reading thread to one awaiting reader. `@unchecked Sendable`: every field is
/// guarded by `lock`.
private final class LineQueue: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    private var finished = false
    private var waiter: CheckedContinuation<String?, Never>?

    func push(_ line: String) {
        lock.lock()
        if let waiter {
            self.waiter = nil
            lock.unlock()
            waiter.resume(returning: line)
            return
        }
        lines.append(line)
        lock.unlock()
    }

    func finish() {
        lock.lock()
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        lock.unlock()
        waiter?.resume(returning: nil)
    }

    func next() async -> String? {
        await withCheckedContinuation { continuation in
            lock.lock()
            if !lines.isEmpty {
                let line = lines.removeFirst()
                lock.unlock()
                continuation.resume(returning: line)
            } else if finished {
                lock.unlock()
                continuation.resume(returning: nil)
            } else {
                waiter = continuation
                lock.unlock()
            }
        }
    }
}

/// Whether this process may make a mount namespace (`unshare -m`: root, or CAP_SYS_ADMIN), for
/// a helper that sees a file or directory of the test's in place of a system one.
let canMakeMountNamespaces: Bool = {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
    process.arguments = ["-m", "true"]
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}()

/// The launcher that runs a helper in a mount namespace of its own where `source` is
/// bind-mounted over `target`.
func mountNamespaceLauncher(binding source: String, over target: String) -> [String] {
    [
        "/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
        #"mount --bind "$0" "$1" && shift && exec "$@""#, source, target,
    ]
}
