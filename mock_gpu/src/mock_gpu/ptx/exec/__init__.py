"""Running decoded kernels: ``engine`` schedules all threads of whole blocks vectorized with numpy, ``memops`` moves
data per state space, ``warp`` implements the warp-collective instructions."""
