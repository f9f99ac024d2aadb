/// Timings of one impl on one workload, in milliseconds.
struct Timings: Sendable {
    /// One duration per timed repetition, in the order they ran.
    var samples: [Double]

    var min: Double { samples.min() ?? .nan }

    var median: Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// What ``measure(reps:_:)`` found: the timings, and results to check outside the timed region.
struct Measurement<Result> {
    /// The result of the untimed warm-up run.
    var warmUp: Result
    /// The result of the last timed run.
    var last: Result
    var timings: Timings
}

/// Runs `body` once untimed (warm-up), then `reps` times, timing each run with a monotonic clock.
///
/// Only the call to `body` is timed: the previous run's result is released after the clock
/// stops, and every result goes through ``blackHole(_:)`` so that no run can be optimized away.
func measure<Result>(reps: Int, _ body: () -> Result) -> Measurement<Result> {
    precondition(reps > 0, "measure: reps must be positive")
    let clock = ContinuousClock()
    let warmUp = body()
    blackHole(warmUp)
    var samples: [Double] = []
    samples.reserveCapacity(reps)
    var last: Result?
    for _ in 0..<reps {
        let start = clock.now
        let result = body()
        let elapsed = start.duration(to: clock.now)
        blackHole(result)
        last = result
        samples.append(elapsed.milliseconds)
    }
    return Measurement(warmUp: warmUp, last: last!, timings: Timings(samples: samples))
}

/// Consumes a value in a way the optimizer cannot see through.
@_optimize(none)
func blackHole<T>(_ value: T) {}

extension Duration {
    /// The duration in milliseconds.
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e3 + Double(attoseconds) * 1e-15
    }
}
