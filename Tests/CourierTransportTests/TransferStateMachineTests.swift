import CourierTransport
import Testing

/// The task lifecycle, event by event, including the races the engine and the caller run.
@Suite struct TransferStateMachineTests {
    @Test func aStartedTransferIsEnqueuedOnceAddedAndDelivered() {
        var machine = TransferStateMachine()
        #expect(machine.start() == .enqueue)
        #expect(machine.start() == .none)
        #expect(machine.engineWillAdd() == .add)
        #expect(machine.state == .running)
        #expect(machine.complete() == .deliver)
        #expect(machine.state == .finished(cancelled: false))
    }

    @Test func cancelBeforeStartNeverReachesTheEngine() {
        var machine = TransferStateMachine()
        #expect(machine.cancel() == .finish)
        #expect(machine.start() == .none)
        #expect(machine.state == .finished(cancelled: true))
    }

    @Test func cancelWhileQueuedWithdrawsItAndMakesTheEngineSkipIt() {
        var machine = TransferStateMachine()
        _ = machine.start()
        #expect(machine.cancel() == .finishAndWithdraw)
        #expect(machine.engineWillAdd() == .skip)
    }

    @Test func cancelWhileSuspendedBeforeRunningWithdrawsItOnlyIfTheEngineHasIt() {
        var handed = TransferStateMachine()
        _ = handed.start()
        _ = handed.suspend()
        #expect(handed.cancel() == .finishAndWithdraw)
        var parked = TransferStateMachine()
        _ = parked.start()
        _ = parked.suspend()
        #expect(parked.engineWillAdd() == .park)
        #expect(parked.cancel() == .finish)
        var never = TransferStateMachine()
        _ = never.suspend()
        #expect(never.cancel() == .finish)
    }

    @Test func cancelWhileRunningAsksTheEngineToRemoveIt() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.engineWillAdd()
        #expect(machine.cancel() == .finishAndRemove)
        #expect(machine.cancel() == .none)
    }

    @Test func cancelThatWinsTheRaceDiscardsTheCompletion() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.engineWillAdd()
        _ = machine.cancel()
        #expect(machine.complete() == .discard)
        #expect(machine.state == .finished(cancelled: true))
    }

    @Test func completionThatWinsTheRaceMakesCancelANoOp() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.engineWillAdd()
        #expect(machine.complete() == .deliver)
        #expect(machine.cancel() == .none)
        #expect(machine.state == .finished(cancelled: false))
    }

    @Test func suspendWhileRunningPausesAndResumeUnpauses() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.engineWillAdd()
        #expect(machine.suspend() == .pause)
        #expect(machine.suspend() == .none)
        #expect(machine.resume() == .unpause)
        #expect(machine.resume() == .none)
        #expect(machine.state == .running)
    }

    @Test func suspendBeforeStartHoldsTheTransferUntilResume() {
        var machine = TransferStateMachine()
        #expect(machine.suspend() == .none)
        #expect(machine.start() == .none)
        #expect(machine.resume() == .enqueue)
        #expect(machine.engineWillAdd() == .add)
    }

    @Test func suspendWhileQueuedParksItAndResumeEnqueuesAgain() {
        var machine = TransferStateMachine()
        _ = machine.start()
        #expect(machine.suspend() == .none)
        #expect(machine.engineWillAdd() == .park)
        #expect(machine.resume() == .enqueue)
        #expect(machine.engineWillAdd() == .add)
    }

    @Test func resumeBeforeTheEngineSawTheSuspendDoesNotEnqueueTwice() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.suspend()
        #expect(machine.resume() == .none)
        #expect(machine.engineWillAdd() == .add)
    }

    @Test func resumeStartsATaskThatWasNeverStarted() {
        var machine = TransferStateMachine()
        #expect(machine.resume() == .enqueue)
        #expect(machine.start() == .none)
    }

    @Test func aSuspendedTransferCanStillBeCancelled() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.engineWillAdd()
        _ = machine.suspend()
        #expect(machine.cancel() == .finishAndRemove)
        #expect(machine.resume() == .none)
    }

    @Test func aPausedTransferThatCompletesDelivers() {
        var machine = TransferStateMachine()
        _ = machine.start()
        _ = machine.engineWillAdd()
        _ = machine.suspend()
        #expect(machine.complete() == .deliver)
        #expect(machine.suspend() == .none)
        #expect(machine.resume() == .none)
    }
}
