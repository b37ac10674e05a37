/**
 * Where interrupt requests come from. The Trainer subscribes while `fit()` runs: the first signal stops training
 * at the next step boundary (a checkpoint is saved, `fit()` returns `reason: 'interrupted'`); a second one calls
 * `forceExit` when the source has it.
 */
export interface SignalSource {
  /** Call `handler` on each interrupt; returns the function that unsubscribes. */
  subscribe(handler: (signal: string) => void): () => void;
  /** What a second interrupt does while the first is being handled (the process source exits with 130). */
  forceExit?(signal: string): void;
}

/** Ctrl-C (SIGINT) and SIGTERM of this process. While subscribed, they no longer kill the process at once. */
export function processSignals(signals: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM']): SignalSource {
  return {
    subscribe(handler) {
      const fns = signals.map((s) => {
        const fn = () => handler(s);
        process.on(s, fn);
        return [s, fn] as const;
      });
      return () => {
        for (const [s, fn] of fns) process.off(s, fn);
      };
    },
    forceExit(signal) {
      process.stderr.write(`\n${signal} again: exiting without waiting for the checkpoint\n`);
      process.exit(signal === 'SIGTERM' ? 143 : 130);
    },
  };
}

/** A signal source driven by code (`emit()`): for tests, and for applications with their own stop button. */
export class ManualSignals implements SignalSource {
  private handlers = new Set<(signal: string) => void>();

  subscribe(handler: (signal: string) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /** Deliver a signal to the subscribers. */
  emit(signal = 'SIGINT'): void {
    for (const h of [...this.handlers]) h(signal);
  }

  /** Subscribers now (0 once `fit()` has returned). */
  get listeners(): number {
    return this.handlers.size;
  }
}
