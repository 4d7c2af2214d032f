import CCurlShim

/// Which thread may touch the engine's state: each `CurlEngine` runs libcurl on one thread of
/// its own, and its state, and that of the transfers on it, is touched there only.
///
/// Debug builds check it: ``EngineConfined`` properties and the functions that call
/// ``check(_:)`` stop the process with a message when they run on any other thread, so a
/// mistake fails a test instead of racing in production. Release builds check nothing.
package enum EngineThread {
    /// Marks the calling thread as `engine`'s, for the checks.
    package static func enter(_ engine: CurlEngine) {
        courier_engine_thread_enter(UnsafeRawPointer(Unmanaged.passUnretained(engine).toOpaque()))
    }

    /// In debug builds, stops the process unless the calling thread is an engine's.
    @inline(__always)
    package static func check(
        _ what: @autoclosure () -> String = "engine state", file: StaticString = #fileID, line: UInt = #line
    ) {
        #if DEBUG
        if courier_engine_thread_owner() == nil {
            fatalError("\(what()) touched off the engine thread", file: file, line: line)
        }
        #endif
    }

    /// In debug builds, stops the process unless the calling thread is `engine`'s own.
    @inline(__always)
    package static func check(
        _ engine: CurlEngine, _ what: @autoclosure () -> String = "engine state", file: StaticString = #fileID,
        line: UInt = #line
    ) {
        #if DEBUG
        if courier_engine_thread_owner() != UnsafeRawPointer(Unmanaged.passUnretained(engine).toOpaque()) {
            fatalError("\(what()) touched off its engine's thread", file: file, line: line)
        }
        #endif
    }

    /// Whether the calling thread is an engine's (for tests).
    package static var isCurrent: Bool { courier_engine_thread_owner() != nil }
}

/// A property that only an engine thread may read or change (checked in debug builds; see
/// ``EngineThread``). Setting it up in an initializer is not checked: the object is not shared
/// yet.
@propertyWrapper
package struct EngineConfined<Value> {
    private var value: Value

    package init(wrappedValue: Value) {
        value = wrappedValue
    }

    package var wrappedValue: Value {
        @inline(__always) get {
            EngineThread.check("a property confined to the engine thread")
            return value
        }
        @inline(__always) _modify {
            EngineThread.check("a property confined to the engine thread")
            yield &value
        }
    }
}
