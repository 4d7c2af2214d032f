// `CourierTestHelper reachability PORT`: run in a network namespace of its own (`unshare -n`),
// where it may change links, addresses and routes. Starts Python's http.server on PORT, then
// watches the paths to two hosts while it adds and removes an address and a route and brings
// the loopback link down and up, and sends requests that wait for connectivity (or not).
// Says `ok <check>` for each check that held and `fail <check>: <what happened>` for one that
// did not; `done` at the end.
import Courier
import Foundation
import Synchronization

/// Starts `arguments` (a path, then its arguments) with `posix_spawn`, not Foundation's
/// `Process`, whose run loop needs a loopback socket the namespace may not have yet.
/// With `quiet`, its stdout and stderr go to /dev/null (a server would otherwise hold the
/// test's pipes open after the helper ended).
private func spawn(_ arguments: [String], quiet: Bool = false) -> pid_t {
    var pid: pid_t = 0
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if quiet {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    let result = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
    expect(result == 0, "\(arguments.joined(separator: " ")): \(String(cString: strerror(result)))")
    return pid
}

/// Runs `ip` with `arguments`; fails the helper when it does not succeed.
private func ip(_ arguments: String...) {
    let pid = spawn(["/usr/sbin/ip"] + arguments)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    expect(status == 0, "ip \(arguments.joined(separator: " ")) failed (\(status))")
}

/// Records a check's outcome.
private func check(_ name: String, _ condition: Bool, _ detail: @autoclosure () -> String) {
    say(condition ? "ok \(name)" : "fail \(name): \(detail())")
}

/// The statuses of a monitor, read by a task of their own, for the checks to wait on.
private final class StatusLog: Sendable {
    private let statuses = Mutex<[Reachability]>([])
    private let reader = Mutex<Task<Void, Never>?>(nil)

    init(_ monitor: ReachabilityMonitor) {
        let task = Task { [self] in
            for await status in monitor.statuses { self.statuses.withLock { $0.append(status) } }
        }
        reader.withLock { $0 = task }
    }

    /// Waits (up to 10 s) for the latest status to be `wanted`; returns the statuses so far.
    func waitFor(_ wanted: (Reachability) -> Bool) async -> (Bool, [Reachability]) {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let seen = statuses.withLock { $0 }
            if let last = seen.last, wanted(last) { return (true, seen) }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return (false, statuses.withLock { $0 })
    }

    func stop() { reader.withLock { $0?.cancel() } }
}

/// Notes when a request starts waiting for connectivity.
private final class WaitingMonitor: EventMonitor {
    let waited = Atomic<Int>(0)
    func handle(_ event: RequestEvent) async {
        if case .waitingForConnectivity = event.kind { waited.add(1, ordering: .relaxed) }
    }
}

private func isThroughLoopback(_ status: Reachability) -> Bool {
    if case .reachable(let interface) = status { return interface.isLoopback && interface.index > 0 }
    return false
}

func runReachabilityScenario(port: Int) async {
    ip("link", "set", "lo", "up")
    let server = spawn(
        ["/usr/bin/env", "python3", "-m", "http.server", String(port), "--bind", "0.0.0.0"], quiet: true)
    defer { kill(server, SIGKILL) }
    let local = HTTPSessionManager(configuration: .ephemeral)
    var failure: (any Error)?
    for _ in 0..<500 {
        do {
            _ = try await local.request(.get, "http://127.0.0.1:\(port)/", serializer: DataResponseSerializer())
            failure = nil
            break
        } catch {
            failure = error
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
    expect(failure == nil, "http.server did not start: \(failure.map { "\($0)" } ?? "")")

    // An address appears and goes: the monitor of 10.20.0.1 follows.
    let addressLog = StatusLog(ReachabilityMonitor(host: "10.20.0.1"))
    var (held, seen) = await addressLog.waitFor { $0 == .unreachable }
    check("starts-unreachable", held, "\(seen)")
    ip("addr", "add", "10.20.0.1/32", "dev", "lo")
    (held, seen) = await addressLog.waitFor(isThroughLoopback)
    check("address-added-reachable-through-lo", held, "\(seen)")
    ip("addr", "del", "10.20.0.1/32", "dev", "lo")
    (held, seen) = await addressLog.waitFor { $0 == .unreachable }
    check("address-removed-unreachable", held, "\(seen)")
    check("statuses-are-changes", seen.count == 3, "\(seen)")
    addressLog.stop()

    // A request that waits for connectivity is sent when the path appears.
    let recorder = WaitingMonitor()
    var configuration = HTTPSessionConfiguration.ephemeral
    configuration.waitsForConnectivity = true
    configuration.eventMonitors = [recorder]
    let waiting = HTTPSessionManager(configuration: configuration)
    let request = Task {
        try await waiting.request(.get, "http://10.20.0.1:\(port)/", serializer: DataResponseSerializer())
    }
    var waited = false
    for _ in 0..<1000 where !waited {
        waited = recorder.waited.load(ordering: .relaxed) > 0
        if !waited { try? await Task.sleep(for: .milliseconds(10)) }
    }
    check("request-waits", waited, "no waitingForConnectivity event in 10 s")
    ip("addr", "add", "10.20.0.1/32", "dev", "lo")
    switch await request.result {
    case .success(let response):
        check("request-sent-when-path-appears", response.status.code == 200, "status \(response.status.code)")
        check(
            "request-has-one-transaction", response.metrics.transactions.count == 1,
            "\(response.metrics.transactions.count)")
    case .failure(let error):
        check("request-sent-when-path-appears", false, "\(error)")
    }

    // Without waiting, a request to a host without a route fails at once.
    let plain = HTTPSessionManager(configuration: .ephemeral)
    let start = ContinuousClock.now
    do {
        _ = try await plain.request(.get, "http://10.20.0.2:\(port)/", serializer: DataResponseSerializer())
        check("no-wait-fails-at-once", false, "it succeeded")
    } catch CourierError.cannotConnect {
        check("no-wait-fails-at-once", ContinuousClock.now - start < .seconds(5), "\(ContinuousClock.now - start)")
    } catch {
        check("no-wait-fails-at-once", false, "\(error)")
    }

    // Without a resource timeout, waiting ends with the request's timeout, and says so.
    let waitStart = ContinuousClock.now
    do {
        _ = try await plain.request(
            .get, "http://10.20.0.2:\(port)/",
            options: RequestOptions(requestTimeout: .seconds(1), waitsForConnectivity: true),
            serializer: DataResponseSerializer())
        check("wait-ends-at-the-timeout", false, "it succeeded")
    } catch CourierError.cannotConnect(let context) {
        let elapsed = ContinuousClock.now - waitStart
        check(
            "wait-ends-at-the-timeout", context.message.contains("waited") && elapsed >= .seconds(1),
            "\(context.message) after \(elapsed)")
    } catch {
        check("wait-ends-at-the-timeout", false, "\(error)")
    }

    // A resource timeout is the whole call's: the wait ends with it, as a timeout that says
    // what the call was waiting for.
    let callStart = ContinuousClock.now
    do {
        _ = try await plain.request(
            .get, "http://10.20.0.2:\(port)/",
            options: RequestOptions(resourceTimeout: .seconds(1), waitsForConnectivity: true),
            serializer: DataResponseSerializer())
        check("wait-ends-at-the-call-deadline", false, "it succeeded")
    } catch CourierError.timedOut(let context) {
        let elapsed = ContinuousClock.now - callStart
        check(
            "wait-ends-at-the-call-deadline",
            context.message.contains("waiting for a route to 10.20.0.2") && elapsed < .seconds(30),
            "\(context.message) after \(elapsed)")
    } catch {
        check("wait-ends-at-the-call-deadline", false, "\(error)")
    }

    // A refused connection with a route is not a path problem: no wait.
    let refused = HTTPSessionManager(configuration: configuration)
    let before = recorder.waited.load(ordering: .relaxed)
    do {
        _ = try await refused.request(.get, "http://10.20.0.1:\(port + 1)/", serializer: DataResponseSerializer())
        check("refused-does-not-wait", false, "it succeeded")
    } catch CourierError.cannotConnect {
        check("refused-does-not-wait", recorder.waited.load(ordering: .relaxed) == before, "it waited")
    } catch {
        check("refused-does-not-wait", false, "\(error)")
    }

    // A route through a link that goes down and comes back.
    ip("route", "add", "10.30.0.0/16", "dev", "lo")
    let linkLog = StatusLog(ReachabilityMonitor(host: "10.30.0.1"))
    (held, seen) = await linkLog.waitFor(isThroughLoopback)
    check("route-reachable-through-lo", held, "\(seen)")
    ip("link", "set", "lo", "down")
    (held, seen) = await linkLog.waitFor { $0 == .unreachable }
    check("link-down-unreachable", held, "\(seen)")
    ip("link", "set", "lo", "up")
    ip("route", "replace", "10.30.0.0/16", "dev", "lo")
    (held, seen) = await linkLog.waitFor(isThroughLoopback)
    check("link-up-reachable-again", held, "\(seen)")
    linkLog.stop()
    say("done")
}
