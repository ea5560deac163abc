from lactchain.cli import main

main()
