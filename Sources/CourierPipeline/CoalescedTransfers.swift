@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// The session's shared transfers (request coalescing): concurrent identical requests, by key,
/// wait for one transfer. The transfer is its group's, not any caller's: a caller that is
/// cancelled leaves the group, and the transfer is cancelled only when every caller has left.
package final class CoalescedTransfers: Sendable {
    private let groups = Locked<[String: Group]>([:])

    /// The group of `key`, and whether the caller is its first member (who makes and starts
    /// its transfer with ``Group/run(_:)``); the caller is counted a member either way.
    func join(_ key: String, leaderID: UInt64) -> (group: Group, leads: Bool, member: Member) {
        groups.withLock { groups in
            if let group = groups[key], let member = group.addMember() { return (group, false, member) }
            let group = Group(key: key, owner: self, leaderID: leaderID)
            groups[key] = group
            return (group, true, group.addMember()!)
        }
    }

    /// Groups whose transfer is under way, and the callers waiting in them (tests look).
    package var waiting: (groups: Int, members: Int) {
        groups.withLock { groups in (groups.count, groups.values.reduce(0) { $0 + $1.memberCount }) }
    }

    fileprivate func remove(_ group: Group) {
        groups.withLock { groups in
            if groups[group.key] === group { groups[group.key] = nil }
        }
    }

    /// One shared transfer and the callers waiting for it.
    final class Group: Sendable {
        let key: String
        /// The request number of the call that sent it.
        let leaderID: UInt64
        /// Held strongly: the group's task may end after the session's pipeline has gone (every
        /// caller cancelled, the manager released). The cycle ends when the group leaves
        /// `groups`, which it does as it finishes or is abandoned.
        private let owner: CoalescedTransfers

        private struct State {
            var transfer: (any TransportTransfer)?
            var result: Result<TransferOutput, any Error>?
            var waiters: [ObjectIdentifier: CheckedContinuation<TransferOutput, any Error>] = [:]
            var members = 0
            /// Every member left before the transfer ended: it was cancelled, and nobody joins.
            var abandoned = false
        }

        private let state = Locked(State())

        init(key: String, owner: CoalescedTransfers, leaderID: UInt64) {
            self.key = key
            self.owner = owner
            self.leaderID = leaderID
        }

        var memberCount: Int { state.withLock { $0.members } }

        /// A new member; nil once the group has ended or was abandoned.
        fileprivate func addMember() -> Member? {
            let joined = state.withLock { state -> Bool in
                guard state.result == nil, !state.abandoned else { return false }
                state.members += 1
                return true
            }
            return joined ? Member(group: self) : nil
        }

        /// Starts waiting for `transfer` (already started), on behalf of every member.
        func run(_ transfer: any TransportTransfer) {
            let cancelled = state.withLock { state -> Bool in
                state.transfer = transfer
                return state.abandoned
            }
            if cancelled { transfer.cancel() }
            Task {
                let result: Result<TransferOutput, any Error>
                do {
                    result = .success(try await transfer.value(cancelsWithCaller: false))
                } catch {
                    result = .failure(error)
                }
                self.finish(result)
            }
        }

        private func finish(_ result: Result<TransferOutput, any Error>) {
            owner.remove(self)
            let waiters = state.withLock { state in
                state.result = result
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume(with: result) }
        }

        fileprivate func wait(_ member: Member) async throws -> TransferOutput {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<TransferOutput, any Error>? in
                    if member.hasLeft { return .failure(CancellationError()) }
                    if let result = state.result { return result }
                    state.waiters[ObjectIdentifier(member)] = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }

        /// `member` stops waiting (its caller was cancelled): it gets `CancellationError`; the
        /// last member to leave before the end cancels the transfer.
        fileprivate func leave(_ member: Member) {
            let (waiter, transfer) = state.withLock {
                state -> (CheckedContinuation<TransferOutput, any Error>?, (any TransportTransfer)?) in
                guard state.result == nil else { return (nil, nil) }
                let waiter = state.waiters.removeValue(forKey: ObjectIdentifier(member))
                state.members -= 1
                guard state.members == 0 else { return (waiter, nil) }
                state.abandoned = true
                return (waiter, state.transfer)
            }
            if transfer != nil || state.withLock({ $0.abandoned }) { owner.remove(self) }
            transfer?.cancel()
            waiter?.resume(throwing: CancellationError())
        }

        fileprivate var currentRequest: HTTPRequest? { state.withLock { $0.transfer?.currentRequest } }
        fileprivate var requestURL: String { state.withLock { $0.transfer?.requestURL ?? "" } }
        fileprivate var isFinished: Bool { state.withLock { $0.result != nil || $0.abandoned } }
    }

    /// One caller's hold on a shared transfer, given to its task as its transfer: cancelling
    /// it leaves the group; pausing and rate limits are the transfer's, shared, and ignored.
    final class Member: TransportTransfer, Sendable {
        /// The member left (its caller was cancelled); set once.
        private let left = Locked(false)
        let group: Group

        fileprivate init(group: Group) {
            self.group = group
        }

        fileprivate var hasLeft: Bool { left.withLock { $0 } }

        func start() {}
        func cancel() {
            let first = left.withLock { left in
                defer { left = true }
                return !left
            }
            if first { group.leave(self) }
        }
        func suspend() {}
        func resume() {}
        func setMaximumBytesPerSecond(_ rate: Int64?) {}
        func resumeReceiving() {}
        var requestURL: String { group.requestURL }
        var currentRequest: HTTPRequest {
            group.currentRequest ?? HTTPRequest(method: .get, scheme: nil, authority: nil, path: nil)
        }
        var isFinished: Bool { hasLeft || group.isFinished }

        func value(cancelsWithCaller: Bool) async throws -> TransferOutput {
            guard cancelsWithCaller else { return try await group.wait(self) }
            return try await withTaskCancellationHandler {
                try await group.wait(self)
            } onCancel: {
                self.cancel()
            }
        }
    }
}
