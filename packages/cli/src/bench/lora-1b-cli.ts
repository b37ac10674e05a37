// The `rusty` command as its own bundle entry for the GPU machine (`../shared/gpu/pack.sh` names a bundle after its
// entry file: this one is `lora-1b-cli`, so packing it never replaces another benchmark's `bin`). Used by lora-1b.sh.
import '../bin';
