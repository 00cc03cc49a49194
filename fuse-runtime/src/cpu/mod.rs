// placeholder: the CPU interpreter lands here
