from lactchain.cli import main

# Guarded: engines that start workers with `spawn` (vLLM on GPUs) re-import this module
# in each worker, which must not run the command again.
if __name__ == "__main__":
    main()
