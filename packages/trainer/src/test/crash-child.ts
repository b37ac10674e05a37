// A training process for the crash test (bundled with esbuild and run with node by crash.test.ts).
// argv: <checkpointDir> <maxSteps> <hangAtStep|-1> [resume|fresh] [phase to hang in, default tensors-written]
// Prints JSON lines: {"step","loss"} per step, {"committed"} per checkpoint, {"writing"} when the save of
// `hangAtStep` reaches the phase (it then hangs there until killed), {"done"} at the end.
import { createContext } from '@rusty/backend';
import { GradScaler } from '../grad-scaler';
import { Trainer } from '../trainer';
import { setup } from './helpers';

const [dir, maxSteps, hangAt, resume, hangPhase = 'tensors-written'] = process.argv.slice(2);
const out = (o: object): void => void process.stdout.write(JSON.stringify(o) + "\n");
const ctx = await createContext();
const { model, optimizer, scheduler, data } = setup(ctx);
const trainer = new Trainer({
  model,
  optimizer,
  scheduler,
  data,
  maxSteps: Number(maxSteps),
  gradientAccumulationSteps: 2,
  maxGradNorm: 0.5,
  scaler: new GradScaler(ctx),
  checkpointDir: dir,
  saveEvery: 1,
  keepLast: 2,
  signals: false,
  callbacks: {
    onStep: (m) => out({ step: m.step, loss: m.loss }),
    onCheckpoint: (_p, step) => out({ committed: step }),
    async onCheckpointPhase(phase, _dir, t) {
      if (phase === hangPhase && t.step === Number(hangAt)) {
        out({ writing: t.step, phase });
        await new Promise(() => undefined); // killed here, in the middle of writing the checkpoint
      }
    },
  },
});
const r = await trainer.fit({ resume: resume === 'resume' });
out({ done: r.step, resumedFrom: r.resumedFrom });
ctx.destroy();
